// ShardWriter: header, then one chunk per column per row group, then the
// footer and trailer (data/shard_layout.h, docs/FORMAT.md).
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/shard_chunk.h"
#include "data/shard_layout.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/sha256.h"
#include "topspin/data/shard.h"

namespace topspin {
namespace {

using namespace shard_layout;

constexpr int kMaxZstdLevel = 19;

ShardWriterOptions CheckedOptions(ShardWriterOptions options) {
  if (options.zstd_level < 0 || options.zstd_level > kMaxZstdLevel) {
    throw ConfigError(
        fmt::format("zstd level {} is out of range 0..{}", options.zstd_level, kMaxZstdLevel),
        ErrorWhere{.field = "zstd_level"},
        "use 0 to store uncompressed, or 1..19 (3 is fast and small)");
  }
  return options;
}

bool IsValidUtf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

std::vector<ColumnSpec> CheckedSchema(std::vector<ColumnSpec> schema, const fs::path& path) {
  std::set<std::string> names;
  const auto bad = [&](const std::string& what) {
    return DataError(what, ErrorWhere{.file = path.string()},
                     "give every column a unique, non-empty UTF-8 name");
  };
  for (const auto& spec : schema) {
    if (!DTypeFromByte(static_cast<uint8_t>(spec.dtype))) {
      throw InternalError(
          fmt::format("column \"{}\": invalid dtype {}", spec.name, static_cast<int>(spec.dtype)));
    }
    if (spec.name.empty()) throw bad("a column has an empty name");
    if (!IsValidUtf8(spec.name)) throw bad("a column name is not valid UTF-8");
    if (!names.insert(spec.name).second)
      throw bad(fmt::format("duplicate column \"{}\"", spec.name));
  }
  return schema;
}

std::string DescribeSchema(const std::vector<ColumnSpec>& schema) {
  std::string out;
  for (const auto& spec : schema) {
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", spec.name, DTypeName(spec.dtype));
  }
  return "[" + out + "]";
}

}  // namespace

struct ShardWriter::Impl {
  Impl(fs::path p, std::vector<ColumnSpec> s, ShardWriterOptions o)
      : path(std::move(p)),
        options(CheckedOptions(o)),
        schema(CheckedSchema(std::move(s), path)),
        file(path),
        encoder(options.zstd_level, options.byte_planes) {
    Write(EncodeHeader(Header{}));
  }

  void Write(std::span<const std::byte> bytes) {
    sha.Update(bytes.data(), bytes.size());
    file.Write(bytes.data(), bytes.size());
  }

  void CheckUsable(const char* what) const {
    if (finished)
      throw InternalError(fmt::format("ShardWriter::{} after Finish: {}", what, path.string()));
    if (failed) {
      throw InternalError(
          fmt::format("ShardWriter::{} after an earlier write failed: {}", what, path.string()));
    }
  }

  void CheckTable(const Table& rows) const {
    if (rows.schema() != schema) {
      throw InternalError(fmt::format("{}: row group schema {} differs from the shard's {}",
                                      path.string(), DescribeSchema(rows.schema()),
                                      DescribeSchema(schema)));
    }
    for (const auto& column : rows.columns) {
      if (column.size() != rows.rows()) {
        throw InternalError(fmt::format("{}: column \"{}\" has {} rows, the row group {}",
                                        path.string(), column.name(), column.size(), rows.rows()));
      }
    }
  }

  void AppendRowGroup(const Table& rows) {
    RowGroupInfo group{.rows = rows.rows(), .chunks = {}};
    for (const Column& column : rows.columns) {
      ChunkInfo info;
      const auto stored = encoder.Encode(column, info);
      info.offset = file.bytes_written();
      Write(stored);
      raw_bytes += info.raw_size;
      group.chunks.push_back(info);
    }
    total_rows += group.rows;
    row_groups.push_back(std::move(group));
  }

  fs::path path;
  ShardWriterOptions options;
  std::vector<ColumnSpec> schema;
  AtomicFileWriter file;
  ChunkEncoder encoder;
  Sha256 sha;
  std::vector<RowGroupInfo> row_groups;
  uint64_t total_rows = 0;
  uint64_t raw_bytes = 0;
  bool finished = false;
  bool failed = false;  // a write threw: the file no longer matches the index
};

ShardWriter::ShardWriter(std::filesystem::path path, std::vector<ColumnSpec> schema,
                         ShardWriterOptions options)
    : impl_(std::make_unique<Impl>(std::move(path), std::move(schema), options)) {}

ShardWriter::~ShardWriter() = default;

void ShardWriter::WriteRowGroup(const Table& rows) {
  impl_->CheckUsable("WriteRowGroup");
  impl_->CheckTable(rows);
  if (rows.rows() == 0) return;
  try {
    impl_->AppendRowGroup(rows);
  } catch (...) {
    impl_->failed = true;
    throw;
  }
}

uint64_t ShardWriter::rows_written() const {
  return impl_->total_rows;
}

uint64_t ShardWriter::bytes_written() const {
  return impl_->file.bytes_written();
}

ShardSummary ShardWriter::Finish() {
  Impl& s = *impl_;
  s.CheckUsable("Finish");
  s.finished = true;
  const std::string footer = SerializeFooter(Footer{s.schema, s.total_rows, s.row_groups});
  const Trailer trailer{.footer_offset = s.file.bytes_written(),
                        .footer_size = footer.size(),
                        .footer_checksum = Xxh3(footer)};
  s.Write(std::as_bytes(std::span(footer)));
  s.Write(EncodeTrailer(trailer));
  s.file.Commit();
  return ShardSummary{.path = s.path,
                      .rows = s.total_rows,
                      .row_groups = s.row_groups.size(),
                      .file_bytes = s.file.bytes_written(),
                      .raw_bytes = s.raw_bytes,
                      .sha256 = s.sha.HexDigest()};
}

}  // namespace topspin
