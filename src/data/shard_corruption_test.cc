// Damaged shards: every flipped byte and every truncation is an
// Error{kData} that names the file (and for chunks the column, row group
// and byte offset); nothing crashes or reads out of bounds (this file also
// runs under ASan/UBSan).
#include <functional>
#include <regex>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "data/shard_chunk.h"
#include "data/shard_layout.h"
#include "data/shard_test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/rng.h"
#include "topspin/data/shard.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::vector<ColumnSpec> kSchema = {
    {"price", DType::kFloat32}, {"title", DType::kString}, {"tokens", DType::kTokensU16}};

// Row group `g` of kSchema: compressible values (so zstd chunks stay
// zstd), nulls, empty strings and empty token lists.
Table SampleGroup(int g, size_t rows) {
  Table t = Table::Empty(kSchema);
  for (size_t r = 0; r < rows; ++r) {
    if ((r + g) % 5 == 2) {
      t.columns[0].AppendNull();
    } else {
      t.columns[0].AppendFloat(static_cast<double>(r % 7) * 0.5);
    }
    t.columns[1].AppendString(r % 4 == 3 ? "" : fmt::format("item {} of group {}", r % 9, g));
    t.columns[2].AppendTokens(std::vector<uint32_t>(r % 6, 100 + g));
  }
  return t;
}

// A shard with four row groups of kSchema, written at `level`.
fs::path WriteSample(const testing::TempDir& dir, int level, size_t rows_per_group = 50) {
  const fs::path path = dir / fmt::format("shard-00003-z{}.tshard", level);
  ShardWriter writer(path, kSchema, {.zstd_level = level});
  for (int g = 0; g < 4; ++g) writer.WriteRowGroup(SampleGroup(g, rows_per_group));
  writer.Finish();
  return path;
}

// Reads every chunk without checksums: on damaged data each read may
// succeed, but may only ever throw Error{kData}.
void ReadAllUnverified(const ShardReader& reader) {
  for (size_t g = 0; g < reader.num_row_groups(); ++g) {
    for (size_t c = 0; c < reader.schema().size(); ++c) {
      try {
        reader.ReadChunk(g, c, /*verify=*/false);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kData) << e.Message();
      }
    }
  }
}

// Opens, verifies and reads everything (what a damaged file must fail),
// then, if it opened, reads every chunk unverified. Returns the first error.
std::optional<Error> OpenVerifyAndReadAll(const fs::path& path) {
  std::optional<ShardReader> reader;
  std::optional<Error> error;
  try {
    reader.emplace(path);
    reader->VerifyAll();
    for (size_t g = 0; g < reader->num_row_groups(); ++g) reader->ReadRowGroup(g);
  } catch (const Error& e) {
    error = e;
  }
  if (reader) ReadAllUnverified(*reader);
  return error;
}

std::optional<Error> ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// The byte range of each chunk, with its column and row group.
struct ChunkSpan {
  uint64_t begin, end;
  std::string column;
  size_t row_group;
};
std::vector<ChunkSpan> ChunkSpans(const fs::path& path) {
  const ShardReader reader(path);
  std::vector<ChunkSpan> spans;
  for (size_t g = 0; g < reader.num_row_groups(); ++g) {
    for (size_t c = 0; c < reader.schema().size(); ++c) {
      const ChunkInfo& info = reader.row_group(g).chunks[c];
      spans.push_back({info.offset, info.offset + info.stored_size, reader.schema()[c].name, g});
    }
  }
  return spans;
}

// The message a damaged byte at `at` must give, as a prefix after "<file>: ".
std::string ExpectedPrefix(uint64_t at, uint64_t size, const std::vector<ChunkSpan>& chunks) {
  const uint64_t trailer = size - shard_layout::kTrailerSize;
  if (at < 8) return "byte 0: not a topspin shard";
  if (at < 16) return at < 12 ? "byte 8: " : "byte 12: unknown header flags";
  for (const auto& c : chunks) {
    if (at >= c.begin && at < c.end) {
      return fmt::format("byte {}: column \"{}\" row group {}: checksum mismatch", c.begin,
                         c.column, c.row_group);
    }
  }
  if (at < trailer)
    return "byte " + std::to_string(chunks.back().end) + ": footer checksum mismatch";
  if (at < trailer + 16) return fmt::format("byte {}: the trailer places the footer", trailer);
  if (at < trailer + 24)
    return "byte " + std::to_string(chunks.back().end) + ": footer checksum mismatch";
  if (at < trailer + 28)
    return fmt::format("byte {}: the trailer says format version", trailer + 24);
  return fmt::format("byte {}: the file does not end with the shard magic", size - 8);
}

// Param: the zstd level. Uncompressed samples are kept small (every byte is
// tried, and each try maps the file); compressed ones need enough rows for
// zstd to shrink them.
class ShardDamageByCodec : public ::testing::TestWithParam<int> {
 protected:
  fs::path WriteParamSample(const testing::TempDir& dir) {
    const fs::path path = WriteSample(dir, GetParam(), GetParam() == 0 ? 12 : 50);
    const ShardReader reader(path);
    size_t zstd = 0, split = 0;
    for (size_t g = 0; g < reader.num_row_groups(); ++g) {
      for (const auto& c : reader.row_group(g).chunks) {
        zstd += c.codec == Codec::kZstd ? 1 : 0;
        split += c.codec == Codec::kZstdSplit ? 1 : 0;
      }
    }
    // Compressed samples damage both kinds of zstd chunk.
    EXPECT_EQ(zstd > 0, GetParam() > 0);
    EXPECT_EQ(split > 0, GetParam() > 0);
    return path;
  }
};

TEST_P(ShardDamageByCodec, EveryFlippedByteIsADataErrorNamingWhere) {
  testing::TempDir dir;
  const fs::path good = WriteParamSample(dir);
  const std::string bytes = testing::ReadBytes(good);
  const auto chunks = ChunkSpans(good);
  const fs::path bad = dir / "damaged.tshard";
  for (size_t at = 0; at < bytes.size(); ++at) {
    const auto flip = static_cast<char>(1u << (at % 8));  // every bit position across bytes
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ flip);
    testing::WriteBytes(bad, damaged);
    const auto e = OpenVerifyAndReadAll(bad);
    ASSERT_TRUE(e.has_value()) << "byte " << at << " flip " << int(flip) << " went unnoticed";
    EXPECT_EQ(e->kind(), ErrorKind::kData);
    EXPECT_THAT(e->Message(),
                StartsWith(bad.string() + ": " + ExpectedPrefix(at, bytes.size(), chunks)))
        << "byte " << at;
    EXPECT_FALSE(e->hint().empty());
  }
}

TEST_P(ShardDamageByCodec, EveryTruncationAndExtensionIsADataError) {
  testing::TempDir dir;
  const std::string bytes = testing::ReadBytes(WriteParamSample(dir));
  const fs::path bad = dir / "short.tshard";
  for (size_t size = 0; size < bytes.size();
       size += (size < 128 || size + 128 > bytes.size()) ? 1 : 5) {
    testing::WriteBytes(bad, bytes.substr(0, size));
    const auto e = ErrorOf([&] { ShardReader reader(bad); });
    ASSERT_TRUE(e.has_value()) << "truncated to " << size << " bytes, opened";
    EXPECT_EQ(e->kind(), ErrorKind::kData);
    EXPECT_THAT(e->Message(), StartsWith(bad.string() + ": "));
    EXPECT_THAT(e->hint(), HasSubstr("damaged"));
  }
  for (const std::string& extra : {std::string("x"), std::string(100, '\0'), bytes}) {
    testing::WriteBytes(bad, bytes + extra);
    const auto e = ErrorOf([&] { ShardReader reader(bad); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind(), ErrorKind::kData);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, ShardDamageByCodec, ::testing::Values(0, 3),
                         [](const auto& info) { return info.param == 0 ? "None" : "Zstd"; });

TEST(ShardDamage, ChecksumMessageReadsLikeTheStyleGuide) {
  testing::TempDir dir;
  const fs::path path = WriteSample(dir, 3, 50);
  const ChunkInfo info = ShardReader(path).row_group(3).chunks[0];
  std::string bytes = testing::ReadBytes(path);
  bytes[info.offset + info.stored_size / 2] ^= 0x10;
  testing::WriteBytes(path, bytes);
  const ShardReader reader(path);
  const auto e = ErrorOf([&] { reader.VerifyAll(); });
  ASSERT_TRUE(e.has_value());
  const std::regex expected(
      std::regex_replace(path.string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      fmt::format(R"(: byte {}: column "price" row group 3: checksum mismatch \(expected )"
                  R"([0-9a-f]{{16}}, got [0-9a-f]{{16}}\); hint: the file is damaged: re-run )"
                  R"(topspin convert)",
                  info.offset));
  EXPECT_TRUE(std::regex_match(e->Message(), expected)) << e->Message();
  EXPECT_EQ(ErrorOf([&] { reader.ReadRowGroup(3, {"title", "price"}); })->Message(), e->Message());
  EXPECT_NO_THROW(reader.ReadRowGroup(2));  // damage stays local
  EXPECT_NO_THROW(reader.ReadRowGroup(3, {"title"}));
}

TEST(ShardDamage, NewerFormatVersionAsksForAnUpgrade) {
  testing::TempDir dir;
  const fs::path path = WriteSample(dir, 0);
  std::string bytes = testing::ReadBytes(path);
  bytes[8] = 2;
  bytes[bytes.size() - 12] = 2;
  testing::WriteBytes(path, bytes);
  const auto e = ErrorOf([&] { ShardReader reader(path); });
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->Message(),
              HasSubstr("byte 8: shard format version 2 is newer than this topspin reads (1)"));
  EXPECT_THAT(e->hint(), HasSubstr("upgrade topspin"));
}

// ---- damage behind a valid checksum (as a fuzzer would craft it) ------------

using testing::RewriteFooter;

struct FooterCase {
  const char* name;
  std::function<void(nlohmann::json&)> mutate;
  const char* message;
};

TEST(ShardDamage, FooterFieldsAreCheckedWithTheirJsonPath) {
  using nlohmann::json;
  const std::vector<FooterCase> cases = {
      {"codec", [](json& f) { f["row_groups"][0]["chunks"][1]["codec"] = "lz4"; },
       R"(footer: row_groups[0].chunks[1].codec: unknown codec "lz4")"},
      {"gap",
       [](json& f) {
         f["row_groups"][1]["chunks"][0]["offset"] =
             f["row_groups"][1]["chunks"][0]["offset"].get<uint64_t>() + 1;
       },
       "footer: row_groups[1].chunks[0].offset: chunk at byte"},
      {"bomb", [](json& f) { f["row_groups"][0]["chunks"][1]["raw_size"] = uint64_t{1} << 60; },
       "footer: row_groups[0].chunks[1].raw_size: raw size 1152921504606846976 is more than zstd"},
      {"overrun",
       [](json& f) { f["row_groups"][3]["chunks"][2]["stored_size"] = uint64_t{1} << 40; },
       "runs into the footer"},
      {"dtype", [](json& f) { f["schema"][2]["dtype"] = "float16"; },
       R"(footer: schema[2].dtype: unknown dtype "float16" (known: float32, float64, int32, )"},
      {"duplicate", [](json& f) { f["schema"][1]["name"] = "price"; },
       R"(footer: schema[1].name: duplicate column "price")"},
      {"rows", [](json& f) { f["rows"] = 199; },
       "footer: rows: 199 rows, but the row groups hold 200"},
      {"chunks", [](json& f) { f["row_groups"][2]["chunks"].erase(2); },
       "footer: row_groups[2].chunks: 2 chunks for 3 columns"},
      {"version", [](json& f) { f["version"] = 2; }, "footer: version: format version 2"},
      {"checksum", [](json& f) { f["row_groups"][0]["chunks"][0]["checksum"] = "ABC"; },
       "footer: row_groups[0].chunks[0].checksum: expected 16 lowercase hex digits"},
      {"missing", [](json& f) { f.erase("schema"); }, R"(footer: footer: missing field "schema")"},
      {"negative", [](json& f) { f["row_groups"][0]["rows"] = -6; },
       "footer: row_groups[0].rows: expected a non-negative integer"},
      {"zero_rows", [](json& f) { f["row_groups"][0]["rows"] = 0; },
       "footer: row_groups[0].rows: a row group holds at least one row"},
      {"nulls", [](json& f) { f["row_groups"][0]["chunks"][0]["null_count"] = 51; },
       "footer: row_groups[0].chunks[0].null_count: 51 nulls in a row group of 50 rows"},
      {"not_object", [](json& f) { f = json::array(); }, "footer: footer: expected an object"},
      {"runs", [](json& f) { f["row_groups"][0]["chunks"][1]["runs"] = 51; },
       "footer: row_groups[0].chunks[1].runs: 51 runs in a row group of 50 rows"},
      {"longest_run",
       [](json& f) {
         f["row_groups"][0]["chunks"][1]["runs"] = 10;
         f["row_groups"][0]["chunks"][1]["longest_run"] = 4;
       },
       "footer: row_groups[0].chunks[1].longest_run: a longest run of 4 rows, but 10 runs of 50 "
       "rows need 5 to 41"},
      {"half_runs", [](json& f) { f["row_groups"][0]["chunks"][1].erase("longest_run"); },
       R"(missing field "longest_run")"},
  };
  testing::TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path path = WriteSample(dir, 3);
    RewriteFooter(path, c.mutate);
    const auto e = ErrorOf([&] { ShardReader reader(path); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind(), ErrorKind::kData);
    EXPECT_THAT(e->Message(), HasSubstr(c.message));
    EXPECT_THAT(e->Message(), StartsWith(path.string() + ": byte "));
    fs::remove(path);
  }
  const fs::path path = WriteSample(dir, 3);
  RewriteFooter(path, nullptr, "{\"version\": 1,");
  EXPECT_THAT(ErrorOf([&] { ShardReader reader(path); })->Message(),
              HasSubstr("footer is not valid JSON"));
}

// Rewrites the stored bytes of one chunk (same size) and fixes its checksum,
// so only the layout checks can notice.
void RewriteChunk(const fs::path& path, size_t row_group, size_t column,
                  const std::function<void(std::string&)>& mutate) {
  const ChunkInfo info = ShardReader(path).row_group(row_group).chunks[column];
  std::string bytes = testing::ReadBytes(path);
  std::string stored = bytes.substr(info.offset, info.stored_size);
  mutate(stored);
  bytes.replace(info.offset, info.stored_size, stored);
  testing::WriteBytes(path, bytes);
  RewriteFooter(path, [&](nlohmann::json& f) {
    f["row_groups"][row_group]["chunks"][column]["checksum"] = HexU64(Xxh3(stored));
  });
}

void PutU64At(std::string& s, size_t at, uint64_t v) {
  shard_layout::PutU64(reinterpret_cast<std::byte*>(s.data() + at), v);
}

struct ChunkCase {
  const char* name;
  size_t column;
  std::function<void(std::string&)> mutate;
  const char* message;
  bool in_header = true;  // VerifyAll checks chunk headers, not the decoded sections
};

TEST(ShardDamage, ChunkLayoutIsCheckedEvenWithoutChecksums) {
  // Uncompressed, row group 1, 6 rows: price has a validity byte at 64;
  // title has no nulls, so its offsets start at 64.
  const std::vector<ChunkCase> cases = {
      {"rows", 0, [](std::string& s) { PutU64At(s, 8, 7); },
       "chunk header: 7 rows, the row group has 6"},
      {"dtype", 1, [](std::string& s) { s[0] = 8; },
       "chunk header: dtype byte 8 (tokens_u32), the schema says string"},
      {"codec", 1, [](std::string& s) { s[1] = 1; },
       "chunk header: codec byte 1, the footer says none"},
      {"reserved", 2, [](std::string& s) { s[5] = 1; },
       "chunk header: reserved bytes are not zero"},
      {"sizes", 1,
       [](std::string& s) {
         PutU64At(s, 48, 3);
         PutU64At(s, 56, 3);
       },
       "chunk header: sections add up to"},
      {"decreasing", 1, [](std::string& s) { PutU64At(s, 64 + 8, 1000); },
       "column \"title\" row group 1: offsets decrease at row 1", false},
      {"wrapping", 2, [](std::string& s) { PutU64At(s, 64 + 6 * 8, 15 + (uint64_t{1} << 63)); },
       "offsets end at 9223372036854775823 but 30 value bytes", false},  // x2 wraps to 30
      {"bitmap", 0, [](std::string& s) { s[64] = static_cast<char>(s[64] ^ 0x01); },
       "null rows, the footer says", false},
  };
  testing::TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path path = dir / "layout.tshard";
    ShardWriter writer(path, kSchema, {.zstd_level = 0});
    for (int g = 0; g < 2; ++g) {
      Table t = SampleGroup(0, 6);  // price: row 2 null; tokens: rows of 0..5 tokens
      t.columns[1].Clear();         // titles of 1..6 bytes: offsets strictly increase
      for (int r = 0; r < 6; ++r) t.columns[1].AppendString(std::string(r + 1, 'a'));
      writer.WriteRowGroup(t);
    }
    writer.Finish();
    RewriteChunk(path, 1, c.column, c.mutate);
    const ShardReader reader(path);
    const ChunkInfo info = reader.row_group(1).chunks[c.column];
    for (bool verify : {false, true}) {
      const auto e = ErrorOf([&] { reader.ReadChunk(1, c.column, verify); });
      ASSERT_TRUE(e.has_value());
      EXPECT_EQ(e->kind(), ErrorKind::kData);
      EXPECT_THAT(e->Message(), HasSubstr(c.message));
      EXPECT_THAT(e->Message(),
                  HasSubstr(fmt::format("column \"{}\" row group 1: ", kSchema[c.column].name)));
      ASSERT_TRUE(e->where().byte_offset.has_value());
      const auto byte = static_cast<uint64_t>(*e->where().byte_offset);
      EXPECT_THAT(e->Message(), HasSubstr(fmt::format(": byte {}: ", byte)));
      EXPECT_GE(byte, info.offset);
      EXPECT_LT(byte, info.offset + info.stored_size);
    }
    EXPECT_EQ(ErrorOf([&] { reader.VerifyAll(); }).has_value(), c.in_header);
    fs::remove(path);
  }
}

// Every byte of a zstd chunk damaged behind a fixed checksum: the decoder
// gets garbage frames and must fail cleanly or produce a valid Column.
TEST(ShardDamage, GarbageZstdFramesNeverCrash) {
  testing::TempDir dir;
  const fs::path good = WriteSample(dir, 3, 40);
  const ChunkInfo info = ShardReader(good).row_group(2).chunks[1];
  ASSERT_EQ(info.codec, Codec::kZstd);
  const fs::path path = dir / "z.tshard";
  int failed = 0;
  for (size_t at = shard_layout::kChunkHeaderSize; at < info.stored_size; ++at) {
    fs::copy_file(good, path, fs::copy_options::overwrite_existing);
    RewriteChunk(path, 2, 1, [&](std::string& s) { s[at] = static_cast<char>(s[at] ^ 0x41); });
    const ShardReader reader(path);
    const auto e = ErrorOf([&] { reader.ReadChunk(2, 1); });
    if (e) {
      ++failed;
      EXPECT_EQ(e->kind(), ErrorKind::kData);
      EXPECT_THAT(e->Message(), HasSubstr("column \"title\" row group 2: "));
    }
  }
  EXPECT_GT(failed, 0);
}

// A chunk header that claims byte planes for values that cannot have them
// (strings, bytes) is rejected before anything is decoded.
TEST(Shard, BytePlanesOfStringsOrBytesAreAnError) {
  const std::string file = "x.tshard", column = "title";
  const shard_layout::ChunkWhere where{
      .file = file, .column = column, .row_group = 1, .offset = 16};
  for (const DType dtype : {DType::kString, DType::kUInt8}) {
    const bool strings = dtype == DType::kString;
    shard_layout::ChunkHeader h{.dtype = static_cast<uint8_t>(dtype),
                                .codec = static_cast<uint8_t>(Codec::kZstdSplit),
                                .rows = 2};
    h.offsets = strings ? shard_layout::Section{.raw = 24, .stored = 12} : shard_layout::Section{};
    h.values = {.raw = 2, .stored = 9};
    std::vector<std::byte> stored(shard_layout::kChunkHeaderSize + 21);
    shard_layout::EncodeChunkHeader(h, stored.data());
    const ChunkInfo info{.stored_size = 64 + h.offsets.stored + 9,
                         .raw_size = 64 + h.offsets.raw + 2,
                         .codec = Codec::kZstdSplit};
    stored.resize(info.stored_size);
    const auto e = ErrorOf([&] {
      shard_layout::CheckChunkHeader(stored, info, {column, dtype}, 2, where);
    });
    ASSERT_TRUE(e.has_value()) << DTypeName(dtype);
    EXPECT_EQ(e->kind(), ErrorKind::kData);
    EXPECT_THAT(e->Message(), HasSubstr("codec zstd-split on a"));
    EXPECT_THAT(e->Message(), HasSubstr("x.tshard"));
  }
}

}  // namespace
}  // namespace topspin
