// Helpers for the importer tests (header-only; never linked into the library).
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/data/column.h"
#include "topspin/data/importer.h"

namespace topspin::testing {

inline std::filesystem::path WriteBytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Every row the importer yields, in one table, and the "file:line" of each.
struct Imported {
  Table table;
  std::vector<std::string> locations;
  std::vector<Table> chunks;  // as Next() returned them
};

inline Imported ImportAll(Importer& importer) {
  Imported out{Table::Empty(importer.schema()), {}, {}};
  Table chunk;
  while (importer.Next(&chunk)) {
    out.chunks.push_back(chunk);
    for (size_t r = 0; r < chunk.rows(); ++r) {
      out.table.AppendRow(chunk, r);
      out.locations.push_back(importer.RowLocation(r));
    }
  }
  EXPECT_EQ(chunk.rows(), 0u);
  EXPECT_EQ(importer.bytes_read(), importer.bytes_total());
  return out;
}

// The Error a callable throws (fails the test when it throws none).
template <typename F>
Error ErrorOf(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no topspin::Error thrown";
  return Error(ErrorKind::kInternal, "no error");
}

// Byte-identical columns: same spec, validity, values and offsets.
inline void ExpectSameTable(const Table& a, const Table& b) {
  ASSERT_EQ(a.schema(), b.schema());
  ASSERT_EQ(a.rows(), b.rows());
  for (size_t c = 0; c < a.columns.size(); ++c) {
    const Column& x = a.columns[c];
    const Column& y = b.columns[c];
    EXPECT_TRUE(std::ranges::equal(x.validity(), y.validity())) << x.name();
    EXPECT_TRUE(std::ranges::equal(x.values(), y.values())) << x.name();
    EXPECT_TRUE(std::ranges::equal(x.offsets(), y.offsets())) << x.name();
  }
}

// Options for one format, everything else default.
inline ImportOptions FormatOptions(const char* format) {
  ImportOptions o;
  o.format = format;
  return o;
}

// Serial reference settings: one thread, one range.
inline constexpr ImportTuning kSerial{.threads = 1, .range_bytes = size_t{1} << 30};

// Writes `text` to dir/file and imports it with options.format.
inline Imported ImportTextAs(const TempDir& dir, const std::string& file, std::string_view text,
                             const ImportOptions& options, ImportTuning tuning = kSerial) {
  const auto path = WriteBytes(dir / file, text);
  auto importer = OpenImporter({path}, options, tuning);
  return ImportAll(*importer);
}

// The check every importer's parallel parse passes: for each range size,
// one thread and `threads` threads cut the same chunks, byte for byte, each
// at most options.chunk_rows rows; and any range size yields `want`'s rows,
// locations and skipped rows (`serial` is the importer that produced
// `want`).
inline void ExpectParallelMatchesSerial(const std::filesystem::path& path,
                                        const ImportOptions& options, const Imported& want,
                                        const Importer& serial, std::vector<size_t> ranges,
                                        int threads) {
  for (const size_t range : ranges) {
    SCOPED_TRACE(range);
    auto one = OpenImporter({path}, options, {.threads = 1, .range_bytes = range});
    auto parallel = OpenImporter(
        {path}, options, {.threads = static_cast<size_t>(threads), .range_bytes = range});
    const Imported by_one = ImportAll(*one);
    const Imported got = ImportAll(*parallel);
    ASSERT_EQ(got.chunks.size(), by_one.chunks.size());
    for (size_t i = 0; i < got.chunks.size(); ++i) {
      EXPECT_LE(got.chunks[i].rows(), options.chunk_rows);
      ExpectSameTable(got.chunks[i], by_one.chunks[i]);
    }
    ExpectSameTable(got.table, want.table);
    EXPECT_EQ(got.locations, want.locations);
    EXPECT_EQ(parallel->skipped().rows, serial.skipped().rows);
    EXPECT_EQ(parallel->skipped().examples, serial.skipped().examples);
  }
}

}  // namespace topspin::testing
