#include "topspin/data/shard.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/shard_chunk.h"
#include "data/shard_layout.h"
#include "data/shard_test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/rng.h"
#include "topspin/core/sha256.h"

namespace topspin {
namespace {

using testing::ExpectSameColumn;
using testing::ExpectSameTable;
using ::testing::HasSubstr;
using testing::RandomTable;

ShardSummary WriteShard(const fs::path& path, const std::vector<ColumnSpec>& schema,
                        const std::vector<Table>& groups, int zstd_level = 3) {
  ShardWriter writer(path, schema, ShardWriterOptions{.zstd_level = zstd_level});
  for (const auto& g : groups) writer.WriteRowGroup(g);
  return writer.Finish();
}

template <typename F>
Error CatchError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no topspin::Error thrown";
  return InternalError("none");
}

// ---- round trips --------------------------------------------------------------

TEST(Shard, RoundTripsRandomSchemasAndData) {
  testing::TempDir dir;
  constexpr size_t kGroupRows[] = {1, 2, 7, 8, 9, 63, 64, 65, 300};
  constexpr double kNullRates[] = {0.0, 0.1, 0.9, 1.0};
  Table reused;  // one scratch table across every schema and row group
  for (uint64_t seed = 0; seed < 48; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    PhiloxStream rng(seed, 1);
    const auto schema = testing::RandomSchema(rng);
    std::vector<Table> groups(rng.NextBelow(5));
    for (auto& g : groups) {
      g = RandomTable(schema, kGroupRows[rng.NextBelow(std::size(kGroupRows))], rng,
                      kNullRates[rng.NextBelow(std::size(kNullRates))]);
    }
    const fs::path path = dir / fmt::format("s{}.tshard", seed);
    const ShardSummary summary = WriteShard(path, schema, groups, seed % 2 == 0 ? 3 : 0);

    ShardReader reader(path);
    uint64_t rows = 0, raw = 0;
    for (const auto& g : groups) rows += g.rows();
    EXPECT_EQ(reader.schema(), schema);
    EXPECT_EQ(reader.rows(), rows);
    ASSERT_EQ(reader.num_row_groups(), groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(reader.row_group(g).rows, groups[g].rows());
      for (const auto& c : reader.row_group(g).chunks) raw += c.raw_size;
      ExpectSameTable(reader.ReadRowGroup(g), groups[g]);
      ExpectSameTable(reader.ReadRowGroup(g, {}, /*verify=*/false), groups[g]);
    }
    std::vector<size_t> all(schema.size());
    std::iota(all.begin(), all.end(), 0);
    for (size_t g = groups.size(); g-- > 0;) {  // backwards: buffers shrink and grow
      reader.ReadRowGroupInto(g, all, reused);
      ExpectSameTable(reused, groups[g]);
    }
    reader.VerifyAll();
    EXPECT_EQ(summary.path, path);
    EXPECT_EQ(summary.rows, rows);
    EXPECT_EQ(summary.row_groups, groups.size());
    EXPECT_EQ(summary.file_bytes, fs::file_size(path));
    EXPECT_EQ(summary.raw_bytes, raw);
    EXPECT_EQ(summary.sha256, Sha256File(path));
  }
}

TEST(Shard, EveryDTypeWithNullsEmptyValuesAndOneRowGroups) {
  testing::TempDir dir;
  std::vector<ColumnSpec> schema;
  for (DType d : testing::kAllDTypes) schema.push_back({fmt::format("col_{}", DTypeName(d)), d});
  // Row group 0: one all-null row. Row group 1: one row of empty strings and
  // token lists. Row group 2: values, empties and nulls mixed.
  Table nulls = Table::Empty(schema), empties = Table::Empty(schema), mixed = Table::Empty(schema);
  PhiloxStream rng(7);
  for (size_t i = 0; i < schema.size(); ++i) {
    nulls.columns[i].AppendNull();
    Column& e = empties.columns[i];
    if (schema[i].dtype == DType::kString) {
      e.AppendString("");
    } else if (IsVariableLength(schema[i].dtype)) {
      e.AppendTokens({});
    } else {
      testing::AppendRandomValue(e, rng);
    }
    Column& m = mixed.columns[i];
    for (int r = 0; r < 20; ++r) {
      if (r % 3 == 1) {
        m.AppendNull();
      } else if (r % 5 == 0) {
        m.AppendRow(empties.columns[i], 0);
      } else {
        testing::AppendRandomValue(m, rng);
      }
    }
  }
  for (int level : {0, 3, 19}) {
    const fs::path path = dir / fmt::format("all-{}.tshard", level);
    WriteShard(path, schema, {nulls, empties, mixed}, level);
    ShardReader reader(path);
    reader.VerifyAll();
    ExpectSameTable(reader.ReadRowGroup(0), nulls);
    ExpectSameTable(reader.ReadRowGroup(1), empties);
    ExpectSameTable(reader.ReadRowGroup(2), mixed);
    const Table one = reader.ReadRowGroup(0);
    EXPECT_TRUE(std::isnan(one.Find("col_float32")->Values<float>()[0]));  // null slot holds NaN
    EXPECT_EQ(one.Find("col_int64")->Values<int64_t>()[0], 0);             // others hold 0
    const Table empty = reader.ReadRowGroup(1);
    EXPECT_TRUE(empty.Find("col_string")->IsValid(0));
    EXPECT_EQ(empty.Find("col_string")->StringAt(0), "");
    EXPECT_TRUE(empty.Find("col_tokens_u16")->TokensAt(0).empty());
    EXPECT_EQ(reader.row_group(2).chunks[0].null_count, 7u);  // rows 1, 4, ..., 19
  }
}

TEST(ColumnRuns, RunsOfEqualValuesWithAdjacentNullsAsOneRun) {
  Column ints({"q", DType::kInt64});
  for (int64_t v : {1, 1}) ints.AppendInt(v);
  ints.AppendNull();
  ints.AppendNull();
  for (int64_t v : {2, 2, 2, 1}) ints.AppendInt(v);
  EXPECT_EQ(RunStarts(ints), (std::vector<uint32_t>{0, 2, 4, 7, 8}));
  EXPECT_EQ(CountRuns(ints).runs, 4u);
  EXPECT_EQ(CountRuns(ints).longest, 3u);

  Column strings({"q", DType::kString});  // "" and null are different runs
  for (const char* v : {"a", "a", ""}) strings.AppendString(v);
  strings.AppendNull();
  strings.AppendNull();
  strings.AppendString("b");
  EXPECT_EQ(RunStarts(strings), (std::vector<uint32_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(CountRuns(strings).runs, 4u);
  EXPECT_EQ(CountRuns(strings).longest, 2u);

  Column floats({"q", DType::kFloat32}), narrow({"q", DType::kInt32});
  for (double v : {1.0, 1.0, 1.0, 2.0}) floats.AppendFloat(v);
  narrow.AppendInt(5);
  EXPECT_EQ(RunStarts(floats), (std::vector<uint32_t>{0, 3, 4}));
  EXPECT_EQ(CountRuns(floats).longest, 3u);
  EXPECT_EQ(CountRuns(narrow).runs, 1u);
  EXPECT_EQ(CountRuns(narrow).longest, 1u);
  EXPECT_EQ(RunStarts(Column({"q", DType::kInt64})), std::vector<uint32_t>{0});
  EXPECT_EQ(CountRuns(Column({"q", DType::kInt64})).runs, 0u);
}

// The footer records each int32, int64 and string chunk's runs (what a
// ranking pipeline needs to count lists without decoding), and no others.
TEST(Shard, TheFooterRecordsRunsOfIntAndStringChunks) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"qid", DType::kInt64}, {"name", DType::kString},
                                          {"n", DType::kInt32},   {"x", DType::kFloat32}};
  PhiloxStream rng(3);
  std::vector<Table> groups;
  for (size_t rows : {1, 40, 333}) {
    Table t = Table::Empty(schema);
    for (size_t r = 0; r < rows; ++r) {
      const uint64_t draw = rng.NextU64();
      t.columns[0].AppendInt(int64_t(r / (1 + draw % 7)));
      t.columns[1].AppendString(draw % 3 == 0 ? "x" : "y");
      if (draw % 5 == 0) {
        t.columns[2].AppendNull();
      } else {
        t.columns[2].AppendInt(int64_t(draw % 2));
      }
      t.columns[3].AppendFloat(1.0);
    }
    groups.push_back(std::move(t));
  }
  for (int level : {0, 3}) {
    const fs::path path = dir / fmt::format("runs-{}.tshard", level);
    WriteShard(path, schema, groups, level);
    const ShardReader reader(path);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t c = 0; c < 3; ++c) {
        const ColumnRuns want = CountRuns(groups[g].columns[c]);
        EXPECT_EQ(reader.row_group(g).chunks[c].runs, want.runs) << g << " " << c;
        EXPECT_EQ(reader.row_group(g).chunks[c].longest_run, want.longest) << g << " " << c;
        EXPECT_GE(want.runs, 1u);
      }
      EXPECT_EQ(reader.row_group(g).chunks[3].runs, 0u);  // float32: not recorded
      EXPECT_EQ(reader.row_group(g).chunks[3].longest_run, 0u);
    }
  }
}

TEST(Shard, AStoredNanIsAValueNotANull) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"x", DType::kFloat32}, {"y", DType::kFloat64}};
  Table t = Table::Empty(schema);
  const float payload_nan = std::bit_cast<float>(uint32_t{0x7FC00123});
  t.columns[0].AppendFloat(std::numeric_limits<double>::quiet_NaN());
  t.columns[0].AppendNull();
  t.columns[0].AppendFloat(payload_nan);
  for (double v : {std::numeric_limits<double>::quiet_NaN(), 1.0, -0.0})
    t.columns[1].AppendFloat(v);
  WriteShard(dir / "nan.tshard", schema, {t});
  const Table got = ShardReader(dir / "nan.tshard").ReadRowGroup(0);
  const Column& x = got.columns[0];
  EXPECT_EQ(x.null_count(), 1u);
  EXPECT_TRUE(x.IsValid(0));
  EXPECT_TRUE(std::isnan(x.Values<float>()[0]));
  EXPECT_FALSE(x.IsValid(1));
  EXPECT_TRUE(std::isnan(x.Values<float>()[1]));
  EXPECT_EQ(std::bit_cast<uint32_t>(x.Values<float>()[2]), 0x7FC00123u);  // payload kept
  EXPECT_EQ(got.columns[1].null_count(), 0u);
  EXPECT_TRUE(std::signbit(got.columns[1].Values<double>()[2]));
}

TEST(Shard, ZeroRowGroupsAndEmptyTables) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"a", DType::kInt32}, {"b", DType::kString}};
  ShardWriter writer(dir / "empty.tshard", schema);
  writer.WriteRowGroup(Table::Empty(schema));  // writes nothing
  EXPECT_EQ(writer.rows_written(), 0u);
  const ShardSummary summary = writer.Finish();
  EXPECT_EQ(summary.rows, 0u);
  EXPECT_EQ(summary.row_groups, 0u);
  EXPECT_EQ(summary.raw_bytes, 0u);
  ShardReader reader(dir / "empty.tshard");
  EXPECT_EQ(reader.schema(), schema);
  EXPECT_EQ(reader.rows(), 0u);
  EXPECT_EQ(reader.num_row_groups(), 0u);
  reader.VerifyAll();
  EXPECT_EQ(CatchError([&] { reader.ReadRowGroup(0); }).kind(), ErrorKind::kData);

  const ShardSummary none = WriteShard(dir / "no-columns.tshard", {}, {Table{}});
  EXPECT_EQ(none.rows, 0u);
  EXPECT_TRUE(ShardReader(dir / "no-columns.tshard").schema().empty());
}

TEST(Shard, ProjectionReturnsColumnsInTheOrderAsked) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {
      {"a", DType::kInt64}, {"bb", DType::kString}, {"c", DType::kFloat32}};
  PhiloxStream rng(3);
  const Table t = RandomTable(schema, 50, rng, 0.2);
  WriteShard(dir / "p.tshard", schema, {t});
  ShardReader reader(dir / "p.tshard");
  const Table got = reader.ReadRowGroup(0, {"c", "a", "c"});
  ASSERT_EQ(got.columns.size(), 3u);
  ExpectSameColumn(got.columns[0], t.columns[2]);
  ExpectSameColumn(got.columns[1], t.columns[0]);
  ExpectSameColumn(got.columns[2], t.columns[2]);
  EXPECT_EQ(reader.ColumnIndex("bb"), 1u);

  const Error e = CatchError([&] { reader.ReadRowGroup(0, {"a", "bbb"}); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_EQ(e.Message(),
            fmt::format("{}: no column \"bbb\" in the shard (columns: a, bb, c); hint: "
                        "did you mean \"bb\"?",
                        (dir / "p.tshard").string()));
}

TEST(Shard, RandomAccessByRowGroup) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"row", DType::kInt64}, {"text", DType::kString}};
  std::vector<Table> groups;
  std::vector<int64_t> first_row;
  int64_t row = 0;
  for (int g = 0; g < 20; ++g) {
    Table t = Table::Empty(schema);
    first_row.push_back(row);
    for (int r = 0; r < 1 + g * 7; ++r, ++row) {
      t.columns[0].AppendInt(row);
      t.columns[1].AppendString(fmt::format("row {}", row));
    }
    groups.push_back(std::move(t));
  }
  WriteShard(dir / "r.tshard", schema, groups);
  ShardReader reader(dir / "r.tshard");
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  std::swap(order[3], order[11]);
  for (size_t g : order) {
    const Column c = reader.ReadChunk(g, 0);
    EXPECT_EQ(c.Values<int64_t>()[0], first_row[g]);
    ExpectSameColumn(reader.ReadChunk(g, 1, /*verify=*/false), groups[g].columns[1]);
  }
  EXPECT_EQ(CatchError([&] { reader.ReadChunk(20, 0); }).kind(), ErrorKind::kData);
  EXPECT_EQ(CatchError([&] { reader.ReadChunk(0, 2); }).kind(), ErrorKind::kData);
  EXPECT_EQ(CatchError([&] { (void)reader.row_group(20); }).kind(), ErrorKind::kData);
}

TEST(Shard, ReadingIntoATableReusesItsMemory) {
  testing::TempDir dir;
  PhiloxStream rng(5);
  const std::vector<ColumnSpec> schema = {
      {"f", DType::kFloat32}, {"s", DType::kString}, {"i", DType::kInt64}};
  std::vector<Table> groups;
  for (int g = 0; g < 4; ++g) groups.push_back(RandomTable(schema, 500, rng, g % 2 ? 0.5 : 0.0));
  WriteShard(dir / "reuse.tshard", schema, groups);
  const ShardReader reader(dir / "reuse.tshard");
  const std::vector<size_t> projection = {2, 0};  // i, f
  Table table;
  reader.ReadRowGroupInto(1, projection, table);
  const std::byte* first = table.columns[0].values().data();
  for (size_t g : {0, 3, 2, 1}) {
    reader.ReadRowGroupInto(g, projection, table);
    ASSERT_EQ(table.columns.size(), 2u);
    ExpectSameColumn(table.columns[0], groups[g].columns[2]);
    ExpectSameColumn(table.columns[1], groups[g].columns[0]);
    EXPECT_EQ(table.columns[0].values().data(), first);  // same rows, same memory
  }
  // A failed read names the column and leaves a table that can be reused.
  EXPECT_EQ(CatchError([&] { reader.ReadRowGroupInto(9, projection, table); }).kind(),
            ErrorKind::kData);
  const std::vector<size_t> bad = {0, 7};
  EXPECT_EQ(CatchError([&] { reader.ReadRowGroupInto(0, bad, table); }).kind(), ErrorKind::kData);
  reader.ReadRowGroupInto(2, projection, table);
  ExpectSameColumn(table.columns[1], groups[2].columns[0]);
}

// Row groups end at group boundaries, so one column's chunks differ by a
// few rows; after the first read, a reused table must not grow (and copy)
// again for a chunk a little larger than the one before.
TEST(Shard, ReadingChunksOfSlightlyMoreRowsReusesTheMemory) {
  testing::TempDir dir;
  PhiloxStream rng(6);
  const std::vector<ColumnSpec> schema = {{"f", DType::kFloat32}, {"i", DType::kInt64}};
  const std::vector<size_t> rows = {20000, 20011, 19990, 20250, 21000};
  std::vector<Table> groups;
  for (size_t n : rows) groups.push_back(RandomTable(schema, n, rng, 0.0));
  WriteShard(dir / "grow.tshard", schema, groups);
  const ShardReader reader(dir / "grow.tshard");
  const std::vector<size_t> projection = {0, 1};
  Table table;
  reader.ReadRowGroupInto(0, projection, table);
  const std::byte* f = table.columns[0].values().data();
  const std::byte* i = table.columns[1].values().data();
  for (size_t g = 0; g < rows.size(); ++g) {
    reader.ReadRowGroupInto(g, projection, table);
    ExpectSameColumn(table.columns[0], groups[g].columns[0]);
    ExpectSameColumn(table.columns[1], groups[g].columns[1]);
    EXPECT_EQ(table.columns[0].values().data(), f) << "row group " << g;
    EXPECT_EQ(table.columns[1].values().data(), i) << "row group " << g;
  }
}

TEST(Shard, ParallelReadsFromOneReader) {
  testing::TempDir dir;
  PhiloxStream rng(11);
  const std::vector<ColumnSpec> schema = {
      {"f", DType::kFloat32}, {"s", DType::kString}, {"t", DType::kTokensU32}};
  std::vector<Table> groups;
  for (int g = 0; g < 16; ++g) groups.push_back(RandomTable(schema, 200, rng, 0.1));
  WriteShard(dir / "mt.tshard", schema, groups);
  const ShardReader reader(dir / "mt.tshard");
  std::vector<Table> expected;
  for (size_t g = 0; g < groups.size(); ++g) expected.push_back(reader.ReadRowGroup(g));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int pass = 0; pass < 4; ++pass) {
        for (size_t i = 0; i < groups.size(); ++i) {
          const size_t g = (i * 5 + t) % groups.size();
          const Table got = reader.ReadRowGroup(g, {}, /*verify=*/(t + pass) % 2 == 0);
          for (size_t c = 0; c < got.columns.size(); ++c) {
            const bool same = testing::BytesOf(got.columns[c].values()) ==
                                  testing::BytesOf(groups[g].columns[c].values()) &&
                              testing::BytesOf(got.columns[c].offsets()) ==
                                  testing::BytesOf(groups[g].columns[c].offsets());
            if (!same) ++mismatches;
          }
        }
        if (t == 0) reader.VerifyAll();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  for (size_t g = 0; g < groups.size(); ++g) ExpectSameTable(expected[g], groups[g]);
}

TEST(Shard, CompressesWhatShrinksAndStoresTheRestAsIs) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"zeros", DType::kInt64}, {"noise", DType::kUInt8}};
  PhiloxStream rng(5);
  Table t = Table::Empty(schema);
  for (int r = 0; r < 20000; ++r) {
    t.columns[0].AppendInt(0);
    t.columns[1].AppendInt(rng.NextBelow(256));
  }
  WriteShard(dir / "z.tshard", schema, {t}, 3);
  WriteShard(dir / "n.tshard", schema, {t}, 0);
  const ShardReader z(dir / "z.tshard"), n(dir / "n.tshard");
  const ChunkInfo& zeros = z.row_group(0).chunks[0];
  EXPECT_TRUE(IsZstd(zeros.codec));
  EXPECT_LT(zeros.stored_size * 100, zeros.raw_size);
  EXPECT_EQ(zeros.raw_size, 64u + 20000 * 8);
  EXPECT_EQ(z.row_group(0).chunks[1].codec, Codec::kNone);  // zstd did not shrink it
  EXPECT_EQ(n.row_group(0).chunks[0].codec, Codec::kNone);
  EXPECT_EQ(n.row_group(0).chunks[0].stored_size, n.row_group(0).chunks[0].raw_size);
  ExpectSameTable(z.ReadRowGroup(0), t);
  ExpectSameTable(n.ReadRowGroup(0), t);
}

TEST(Shard, BytePlanesJoinBackIntoTheValues) {
  PhiloxStream rng(11);
  for (const size_t width : {2, 4, 8}) {
    for (const size_t n : {0, 1, 15, 16, 17, 31, 33, 100, 1000}) {
      std::vector<std::byte> values(n * width), planes(n * width), back(n * width);
      for (auto& b : values) b = static_cast<std::byte>(rng.NextBelow(256));
      shard_layout::SplitBytePlanes(values.data(), n, width, planes.data());
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < width; ++k) {
          ASSERT_EQ(planes[k * n + i], values[i * width + k]) << width << " " << n;
        }
      }
      shard_layout::JoinBytePlanes(planes.data(), n, width, back.data());
      EXPECT_EQ(back, values) << "width " << width << ", " << n << " values";
    }
  }
}

// Numbers are stored as byte planes when their first values compress
// smaller that way: small integers, ids and tokens as planes, clustered
// prices plain, strings and bytes never as planes; every value reads back.
// Up to ChunkEncoder's sample (8,192 values) the choice is exact; beyond it
// the sample (the first 8,192 values, or tokens) decides.
TEST(Shard, NumbersKeepTheSmallerOfPlainAndBytePlanes) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"count", DType::kInt32}, {"rating", DType::kFloat32},
                                          {"id", DType::kInt64},    {"title", DType::kString},
                                          {"flag", DType::kUInt8},  {"tokens", DType::kTokensU16}};
  const auto make = [&](int rows) {
    PhiloxStream rng(3);
    Table t = Table::Empty(schema);
    for (int r = 0; r < rows; ++r) {
      t.columns[0].AppendInt(static_cast<int64_t>(rng.NextBelow(100)));
      if (r % 7 == 0) {
        t.columns[1].AppendNull();
      } else {
        const double rating = std::clamp(4.3 + 0.5 * rng.NextNormal(), 1.0, 5.0);
        t.columns[1].AppendFloat(std::round(rating * 100) / 100);
      }
      t.columns[2].AppendInt(static_cast<int64_t>(rng.NextBelow(1'000'000)));
      t.columns[3].AppendString(fmt::format("item {}", rng.NextBelow(50)));
      t.columns[4].AppendInt(static_cast<int64_t>(rng.NextBelow(3)));
      uint32_t tokens[3];
      for (auto& token : tokens) token = static_cast<uint32_t>(rng.NextBelow(200));
      t.columns[5].AppendTokens(tokens);
    }
    return t;
  };
  const auto zstd = [](std::span<const std::byte> bytes) -> size_t {
    if (bytes.empty()) return 0;
    std::vector<char> out(ZSTD_compressBound(bytes.size()));
    return ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
  };
  for (const int rows : {8000, 20000}) {
    SCOPED_TRACE(rows);
    const Table t = make(rows);
    const fs::path path = dir / fmt::format("s{}.tshard", rows);
    WriteShard(path, schema, {t}, 3);
    const ShardReader reader(path);
    const auto& chunks = reader.row_group(0).chunks;
    EXPECT_EQ(chunks[0].codec, Codec::kZstdSplit);
    EXPECT_EQ(chunks[1].codec, Codec::kZstd);  // clustered prices: plain zstd is smaller
    EXPECT_EQ(chunks[2].codec, Codec::kZstdSplit);
    EXPECT_EQ(chunks[3].codec, Codec::kZstd);
    EXPECT_EQ(chunks[4].codec, Codec::kZstd);
    EXPECT_EQ(chunks[5].codec, Codec::kZstdSplit);
    if (rows <= 8192) {  // each number column is its own sample: no larger than either way
      for (size_t c : {0, 1, 2}) {
        const Column& col = t.columns[c];
        const size_t width = shard_layout::SplitWidth(col.dtype());
        std::vector<std::byte> planes(col.values().size());
        shard_layout::SplitBytePlanes(col.values().data(), planes.size() / width, width,
                                      planes.data());
        const size_t others = shard_layout::kChunkHeaderSize + zstd(std::as_bytes(col.validity())) +
                              zstd(std::as_bytes(col.offsets()));
        const size_t plain = others + zstd(col.values()), split = others + zstd(planes);
        EXPECT_EQ(chunks[c].stored_size, std::min(plain, split)) << schema[c].name;
      }
    }
    ExpectSameTable(reader.ReadRowGroup(0), t);
    reader.VerifyAll();
  }
  // Without byte planes (for readers that predate them): zstd or none only.
  const Table t = make(20000);
  {
    ShardWriter writer(dir / "p.tshard", schema, {.zstd_level = 3, .byte_planes = false});
    writer.WriteRowGroup(t);
    writer.Finish();
  }
  const ShardReader plain(dir / "p.tshard");
  for (const ChunkInfo& c : plain.row_group(0).chunks) EXPECT_NE(c.codec, Codec::kZstdSplit);
  ExpectSameTable(plain.ReadRowGroup(0), t);
}

// The bytes of a small uncompressed shard, field by field (docs/FORMAT.md).
TEST(Shard, FileLayoutMatchesTheSpecification) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"price", DType::kFloat32}, {"title", DType::kString}};
  Table t = Table::Empty(schema);
  t.columns[0].AppendFloat(1.5);
  t.columns[0].AppendNull();
  t.columns[1].AppendString("ab");
  t.columns[1].AppendString("");
  const fs::path path = dir / "layout.tshard";
  WriteShard(path, schema, {t}, 0);
  const std::string b = testing::ReadBytes(path);
  const auto u32 = [&](size_t at) {
    return shard_layout::GetU32(reinterpret_cast<const std::byte*>(b.data() + at));
  };
  const auto u64 = [&](size_t at) {
    return shard_layout::GetU64(reinterpret_cast<const std::byte*>(b.data() + at));
  };

  EXPECT_EQ(b.substr(0, 16), std::string("TSPSHARD\x01\0\0\0\0\0\0\0", 16));
  // Chunk 0 (price) at 16: header, validity (1 byte), values (2 x float32).
  EXPECT_EQ(b.substr(16, 8), std::string("\0\0\0\0\0\0\0\0", 8));  // dtype 0, codec 0, reserved
  EXPECT_EQ(u64(24), 2u);                                          // rows
  EXPECT_EQ(u64(32), 1u);
  EXPECT_EQ(u64(40), 1u);  // validity raw / stored
  EXPECT_EQ(u64(48), 0u);
  EXPECT_EQ(u64(56), 0u);  // no offsets
  EXPECT_EQ(u64(64), 8u);
  EXPECT_EQ(u64(72), 8u);    // values
  EXPECT_EQ(b[80], '\x01');  // row 0 valid, row 1 null, padding bits 0
  EXPECT_EQ(u32(81), std::bit_cast<uint32_t>(1.5f));
  EXPECT_EQ(u32(85), 0x7FC00000u);  // the null slot: quiet NaN
  // Chunk 1 (title) at 89: header, offsets (3 x u64), values "ab".
  EXPECT_EQ(b[89], '\x06');  // DType::kString
  EXPECT_EQ(u64(89 + 16), 0u);
  EXPECT_EQ(u64(89 + 32), 24u);
  EXPECT_EQ(u64(89 + 48), 2u);
  EXPECT_EQ(u64(153), 0u);
  EXPECT_EQ(u64(161), 2u);
  EXPECT_EQ(u64(169), 2u);
  EXPECT_EQ(b.substr(177, 2), "ab");
  // Footer at 179, then the 36-byte trailer.
  const size_t footer_size = b.size() - 179 - 36;
  const std::string footer = b.substr(179, footer_size);
  EXPECT_EQ(
      footer,
      fmt::format(R"({{"version":1,"rows":2,"schema":[{{"name":"price","dtype":"float32"}},)"
                  R"({{"name":"title","dtype":"string"}}],"row_groups":[{{"rows":2,"chunks":[)"
                  R"({{"offset":16,"stored_size":73,"raw_size":73,"codec":"none","checksum":"{}",)"
                  R"("null_count":1}},{{"offset":89,"stored_size":90,"raw_size":90,"codec":"none",)"
                  R"("checksum":"{}","null_count":0,"runs":2,"longest_run":1}}]}}]}})",
                  HexU64(Xxh3(b.data() + 16, 73)), HexU64(Xxh3(b.data() + 89, 90))));
  const size_t trailer = b.size() - 36;
  EXPECT_EQ(u64(trailer), 179u);
  EXPECT_EQ(u64(trailer + 8), footer_size);
  EXPECT_EQ(u64(trailer + 16), Xxh3(footer));
  EXPECT_EQ(u32(trailer + 24), 1u);
  EXPECT_EQ(b.substr(trailer + 28), "TSPSHARD");
}

// ---- the writer's contract ---------------------------------------------------

TEST(ShardWriter, RejectsMisuseAndBadOptions) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"a", DType::kInt32}, {"b", DType::kString}};
  ShardWriter writer(dir / "w.tshard", schema);
  EXPECT_EQ(CatchError([&] {
              writer.WriteRowGroup(Table::Empty({{"a", DType::kInt64}}));
            }).kind(),
            ErrorKind::kInternal);
  Table ragged = Table::Empty(schema);
  ragged.columns[0].AppendInt(1);
  EXPECT_EQ(CatchError([&] { writer.WriteRowGroup(ragged); }).kind(), ErrorKind::kInternal);
  ragged.columns[1].AppendString("x");
  writer.WriteRowGroup(ragged);
  EXPECT_EQ(writer.rows_written(), 1u);
  EXPECT_GT(writer.bytes_written(), 16u);
  writer.Finish();
  EXPECT_EQ(CatchError([&] { writer.WriteRowGroup(ragged); }).kind(), ErrorKind::kInternal);
  EXPECT_EQ(CatchError([&] { writer.Finish(); }).kind(), ErrorKind::kInternal);

  for (int level : {-1, 20}) {
    const Error e =
        CatchError([&] { ShardWriter(dir / "x.tshard", schema, {.zstd_level = level}); });
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "zstd_level");
  }
  for (const auto& bad :
       std::vector<std::vector<ColumnSpec>>{{{"a", DType::kInt32}, {"a", DType::kString}},
                                            {{"", DType::kInt32}},
                                            {{"\xff", DType::kBool}}}) {
    EXPECT_EQ(CatchError([&] { ShardWriter(dir / "x.tshard", bad); }).kind(), ErrorKind::kData);
  }
  EXPECT_FALSE(fs::exists(dir / "x.tshard"));
}

TEST(ShardWriter, AnUnfinishedShardNeverAppears) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"a", DType::kInt32}};
  {
    ShardWriter writer(dir / "u.tshard", schema);
    Table t = Table::Empty(schema);
    t.columns[0].AppendInt(1);
    writer.WriteRowGroup(t);
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ShardReader, MissingFileIsAnIoErrorNamingThePath) {
  const Error e = CatchError([] { ShardReader("/nonexistent/s.tshard"); });
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_THAT(e.Message(), HasSubstr("/nonexistent/s.tshard"));
}

TEST(ShardReader, MovesKeepTheOpenShard) {
  testing::TempDir dir;
  const std::vector<ColumnSpec> schema = {{"a", DType::kInt32}};
  Table t = Table::Empty(schema);
  t.columns[0].AppendInt(42);
  WriteShard(dir / "m.tshard", schema, {t});
  ShardReader a(dir / "m.tshard");
  ShardReader b(std::move(a));
  EXPECT_EQ(b.ReadChunk(0, 0).Values<int32_t>()[0], 42);
  a = std::move(b);
  EXPECT_EQ(a.path(), dir / "m.tshard");
  EXPECT_EQ(a.rows(), 1u);
}

}  // namespace
}  // namespace topspin
