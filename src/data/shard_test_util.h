// Helpers shared by the shard tests (header-only; never linked into the
// library): random schemas and tables, column comparison, raw file edits.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <optional>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/shard_layout.h"
#include "topspin/core/hash.h"
#include "topspin/core/rng.h"
#include "topspin/data/column.h"
#include "topspin/data/dtype.h"

namespace topspin::testing {

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64,   DType::kInt32,
                                       DType::kInt64,   DType::kUInt8,     DType::kBool,
                                       DType::kString,  DType::kTokensU16, DType::kTokensU32};

inline double RandomFloat(PhiloxStream& rng) {
  switch (rng.NextBelow(16)) {
    case 0: return std::numeric_limits<double>::quiet_NaN();  // a NaN value, not a null
    case 1: return std::numeric_limits<double>::infinity();
    case 2: return -0.0;
    default: return rng.NextNormal() * 1000;
  }
}

inline void AppendRandomValue(Column& c, PhiloxStream& rng) {
  switch (c.dtype()) {
    case DType::kFloat32:
    case DType::kFloat64: c.AppendFloat(RandomFloat(rng)); break;
    case DType::kInt32: c.AppendInt(static_cast<int32_t>(rng.NextU32())); break;
    case DType::kInt64: c.AppendInt(static_cast<int64_t>(rng.NextU64())); break;
    case DType::kUInt8: c.AppendInt(rng.NextBelow(256)); break;
    case DType::kBool: c.AppendInt(rng.NextBelow(2)); break;
    case DType::kString: {
      std::string s(rng.NextBelow(4) == 0 ? 0 : rng.NextBelow(24), '\0');
      for (char& ch : s) ch = static_cast<char>(rng.NextBelow(256));  // any bytes, even NUL
      c.AppendString(s);
      break;
    }
    case DType::kTokensU16:
    case DType::kTokensU32: {
      std::vector<uint32_t> tokens(rng.NextBelow(4) == 0 ? 0 : rng.NextBelow(12));
      const uint64_t bound = c.dtype() == DType::kTokensU16 ? 65536 : uint64_t{1} << 32;
      for (uint32_t& t : tokens) t = static_cast<uint32_t>(rng.NextBelow(bound));
      c.AppendTokens(tokens);
      break;
    }
  }
}

inline Column RandomColumn(const ColumnSpec& spec, size_t rows, PhiloxStream& rng,
                           double null_rate) {
  Column c(spec);
  for (size_t r = 0; r < rows; ++r) {
    if (rng.NextDouble() < null_rate) {
      c.AppendNull();
    } else {
      AppendRandomValue(c, rng);
    }
  }
  return c;
}

inline Table RandomTable(const std::vector<ColumnSpec>& schema, size_t rows, PhiloxStream& rng,
                         double null_rate) {
  Table t;
  for (const auto& spec : schema) t.columns.push_back(RandomColumn(spec, rows, rng, null_rate));
  return t;
}

// 1..6 columns of random dtypes, named c0, c1, ...
inline std::vector<ColumnSpec> RandomSchema(PhiloxStream& rng) {
  std::vector<ColumnSpec> schema(1 + rng.NextBelow(6));
  for (size_t i = 0; i < schema.size(); ++i) {
    schema[i] =
        ColumnSpec{"c" + std::to_string(i), kAllDTypes[rng.NextBelow(std::size(kAllDTypes))]};
  }
  return schema;
}

template <typename T>
std::vector<uint8_t> BytesOf(std::span<const T> s) {
  const auto b = std::as_bytes(s);
  std::vector<uint8_t> out(b.size());
  if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

// Buffer-exact equality: bit patterns of floats (NaN payloads included),
// null slots and the validity bitmap.
inline void ExpectSameColumn(const Column& got, const Column& want) {
  EXPECT_EQ(got.spec(), want.spec());
  EXPECT_EQ(got.size(), want.size()) << want.name();
  EXPECT_EQ(got.null_count(), want.null_count()) << want.name();
  EXPECT_EQ(BytesOf(got.validity()), BytesOf(want.validity())) << want.name();
  EXPECT_EQ(BytesOf(got.values()), BytesOf(want.values())) << want.name();
  EXPECT_EQ(BytesOf(got.offsets()), BytesOf(want.offsets())) << want.name();
}

inline void ExpectSameTable(const Table& got, const Table& want) {
  ASSERT_EQ(got.columns.size(), want.columns.size());
  for (size_t i = 0; i < want.columns.size(); ++i)
    ExpectSameColumn(got.columns[i], want.columns[i]);
}

inline std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the file. Unlinks first: truncating a file in place makes ext4
// flush it to disk on close (auto_da_alloc), which costs milliseconds.
inline void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::remove(path);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Replaces the shard's footer with `mutate(footer JSON)` (or with
// `raw_text`), keeping the trailer valid: damage behind a valid checksum,
// or a shard as an older writer left it.
inline void RewriteFooter(const std::filesystem::path& path,
                          const std::function<void(nlohmann::json&)>& mutate,
                          const std::optional<std::string>& raw_text = std::nullopt) {
  const std::string bytes = ReadBytes(path);
  const auto trailer = shard_layout::DecodeTrailer(std::as_bytes(std::span(bytes)).last(36));
  std::string text = bytes.substr(trailer.footer_offset, trailer.footer_size);
  if (raw_text) {
    text = *raw_text;
  } else {
    nlohmann::json footer = nlohmann::json::parse(text);
    mutate(footer);
    text = footer.dump();
  }
  const auto tail = shard_layout::EncodeTrailer({.footer_offset = trailer.footer_offset,
                                                 .footer_size = text.size(),
                                                 .footer_checksum = Xxh3(text)});
  WriteBytes(path, bytes.substr(0, trailer.footer_offset) + text +
                       std::string(reinterpret_cast<const char*>(tail.data()), tail.size()));
}

}  // namespace topspin::testing
