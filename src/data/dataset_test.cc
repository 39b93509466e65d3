#include "topspin/data/dataset.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/mount.h>
#include <unistd.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/data/column_stats.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

const std::vector<ColumnSpec> kSchema = {{"label", DType::kFloat32}, {"qid", DType::kInt64},
                                         {"title", DType::kString},  {"tokens", DType::kTokensU32},
                                         {"clicked", DType::kBool},  {"price", DType::kFloat64}};

// `rows` rows in groups whose lengths cycle through 1, 4, 2, 7, 3, 5 (qid
// increasing), with nulls sprinkled over title and price.
Table MakeRows(size_t rows) {
  static constexpr int kLengths[] = {1, 4, 2, 7, 3, 5};
  Table t = Table::Empty(kSchema);
  int64_t qid = 100;
  size_t left_in_group = kLengths[0], group = 0;
  for (size_t i = 0; i < rows; ++i) {
    if (left_in_group == 0) {
      left_in_group = kLengths[++group % 6];
      qid += 1 + static_cast<int64_t>(i % 3);
    }
    --left_in_group;
    t.columns[0].AppendFloat(static_cast<double>(i % 5));
    t.columns[1].AppendInt(qid);
    if (i % 11 == 3) {
      t.columns[2].AppendNull();
    } else {
      t.columns[2].AppendString("title " + std::to_string(i * 7919 % 1000));
    }
    std::vector<uint32_t> tokens(i % 4);
    for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = static_cast<uint32_t>(i * 31 + k);
    t.columns[3].AppendTokens(tokens);
    t.columns[4].AppendInt(static_cast<int64_t>(i % 2));
    if (i % 7 == 0) {
      t.columns[5].AppendNull();
    } else {
      t.columns[5].AppendFloat(static_cast<double>(i) * 0.5);
    }
  }
  return t;
}

Table Slice(const Table& t, size_t begin, size_t end) {
  Table out = Table::Empty(t.schema());
  for (size_t r = begin; r < end; ++r) out.AppendRow(t, r);
  return out;
}

DatasetWriterOptions SmallOptions(const fs::path& out, int threads = 1) {
  DatasetWriterOptions o;
  o.out = out;
  o.schema = kSchema;
  o.label_column = "label";
  o.group_column = "qid";
  o.row_group_rows = 50;
  o.shard_bytes = 8 << 10;
  o.threads = threads;
  o.created_by = "dataset_test";
  return o;
}

// Writes `rows` through Append calls of `chunk` rows.
Manifest WriteDataset(const DatasetWriterOptions& options, const Table& rows, size_t chunk = 137) {
  DatasetWriter writer(options);
  for (size_t at = 0; at < rows.rows(); at += chunk) {
    writer.Append(Slice(rows, at, std::min(rows.rows(), at + chunk)));
  }
  EXPECT_EQ(writer.rows_appended(), rows.rows());
  return writer.Commit();
}

Table ReadAll(const DatasetReader& reader) {
  Table all = Table::Empty(reader.manifest().schema);
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g) {
      const Table t = reader.shard(s).ReadRowGroup(g);
      for (size_t r = 0; r < t.rows(); ++r) all.AppendRow(t, r);
    }
  }
  return all;
}

void ExpectSameTable(const Table& got, const Table& want) {
  ASSERT_EQ(got.schema(), want.schema());
  ASSERT_EQ(got.rows(), want.rows());
  for (size_t c = 0; c < want.columns.size(); ++c) {
    const Column &g = got.columns[c], &w = want.columns[c];
    EXPECT_TRUE(std::ranges::equal(g.validity(), w.validity())) << w.name();
    EXPECT_TRUE(std::ranges::equal(g.values(), w.values())) << w.name();
    EXPECT_TRUE(std::ranges::equal(g.offsets(), w.offsets())) << w.name();
  }
}

std::string ReadBytes(const fs::path& path) {
  return ReadFile(path);
}

void WriteBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Verify()'s error message; fails the test when Verify passes.
std::string VerifyError(const fs::path& dir) {
  try {
    DatasetReader(dir).Verify();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData) << e.Message();
    return e.Message();
  }
  ADD_FAILURE() << "Verify passed on a damaged dataset";
  return "";
}

TEST(Dataset, RoundTripsRowsValuesAndStats) {
  testing::TempDir tmp;
  const Table rows = MakeRows(1000);
  const Manifest written = WriteDataset(SmallOptions(tmp / "ds", 2), rows);
  ASSERT_FALSE(fs::exists(tmp / "ds.incomplete"));

  const DatasetReader reader(tmp / "ds");
  const Manifest& m = reader.manifest();
  EXPECT_EQ(m.rows(), 1000u);
  EXPECT_GT(m.shards.size(), 2u) << "shard_bytes should have rolled several shards";
  EXPECT_EQ(m.ToJson(), written.ToJson());
  EXPECT_EQ(m.label_column, "label");
  EXPECT_EQ(m.created_by, "dataset_test");
  ExpectSameTable(ReadAll(reader), rows);
  EXPECT_NO_THROW(reader.Verify());

  // 1000 rows in groups cycling 1,4,2,7,3,5 (22 rows per cycle).
  EXPECT_EQ(m.group_stats.groups, 45u * 6 + 4);  // 990 rows in 270 groups, then 1+4+2+3
  EXPECT_EQ(m.group_stats.min_length, 1u);
  EXPECT_EQ(m.group_stats.max_length, 7u);
  EXPECT_DOUBLE_EQ(m.group_stats.mean_length, 1000.0 / m.group_stats.groups);
  uint64_t shard_groups = 0;
  for (const auto& s : m.shards) shard_groups += s.groups;
  EXPECT_EQ(shard_groups, m.group_stats.groups);

  for (size_t c = 0; c < rows.columns.size(); ++c) {
    ColumnStatsBuilder single;
    single.Add(rows.columns[c], 0);
    const ColumnStats want = single.Finish();
    const ColumnStats& got = m.stats.at(rows.columns[c].name());
    EXPECT_EQ(got.count, want.count) << rows.columns[c].name();
    EXPECT_EQ(got.nulls, want.nulls) << rows.columns[c].name();
    EXPECT_EQ(got.min, want.min);
    EXPECT_EQ(got.max, want.max);
    EXPECT_NEAR(got.mean, want.mean, 1e-9);
    EXPECT_NEAR(got.std, want.std, 1e-9);
    EXPECT_EQ(got.quantiles, want.quantiles);
  }
  EXPECT_EQ(m.stats.at("price").nulls, 143u);  // i % 7 == 0 for i < 1000
  EXPECT_EQ(m.stats.at("tokens").max, 3);      // list lengths
}

TEST(Dataset, GroupsAreNeverSplitAcrossRowGroupsOrShards) {
  testing::TempDir tmp;
  DatasetWriterOptions o = SmallOptions(tmp / "ds");
  o.row_group_rows = 3;
  o.shard_bytes = 300;
  WriteDataset(o, MakeRows(500), 10);
  const DatasetReader reader(tmp / "ds");
  ASSERT_GT(reader.num_shards(), 5u);
  bool have_last = false;
  int64_t last_qid = 0;
  size_t row_groups = 0;
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g, ++row_groups) {
      const Column qid = reader.shard(s).ReadChunk(g, 1);
      const auto values = qid.Values<int64_t>();
      if (have_last) {
        EXPECT_NE(values.front(), last_qid) << "shard " << s << " row group " << g;
      }
      const bool last = s + 1 == reader.num_shards() && g + 1 == reader.shard(s).num_row_groups();
      if (!last) {
        EXPECT_GE(values.size(), 3u) << "row groups fill up to row_group_rows";
      }
      last_qid = values.back();
      have_last = true;
    }
  }
  EXPECT_GT(row_groups, 50u);
}

TEST(Dataset, StringGroupColumnAndNoGroupColumn) {
  testing::TempDir tmp;
  const std::vector<ColumnSpec> schema = {{"q", DType::kString}, {"x", DType::kInt32}};
  Table t = Table::Empty(schema);
  for (int i = 0; i < 100; ++i) {
    t.columns[0].AppendString(i < 50 ? "a" : (i < 51 ? "b" : "c"));
    t.columns[1].AppendInt(i);
  }
  DatasetWriterOptions o;
  o.out = tmp / "grouped";
  o.schema = schema;
  o.group_column = "q";
  o.row_group_rows = 10;
  Manifest m = WriteDataset(o, t, 7);
  EXPECT_EQ(m.group_stats.groups, 3u);
  EXPECT_EQ(m.group_stats.max_length, 50u);
  // a (50 rows) runs past row_group_rows to end its group; b (1 row) is
  // short of it, so c (49) joins b's row group rather than being cut.
  EXPECT_EQ(m.shards.at(0).row_groups, 2u);

  o.out = tmp / "plain";
  o.group_column.clear();
  m = WriteDataset(o, t, 7);
  EXPECT_EQ(m.group_stats.groups, 0u);
  EXPECT_EQ(m.shards.at(0).groups, 0u);
  EXPECT_EQ(m.shards.at(0).row_groups, 10u);
}

TEST(Dataset, OutputBytesDoNotDependOnThreadCount) {
  testing::TempDir tmp;
  const Table rows = MakeRows(3000);
  WriteDataset(SmallOptions(tmp / "one", 1), rows);
  WriteDataset(SmallOptions(tmp / "three", 3), rows, 1000);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(tmp / "one")) {
    files.push_back(entry.path().filename().string());
  }
  std::vector<std::string> other;
  for (const auto& entry : fs::directory_iterator(tmp / "three")) {
    other.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  std::sort(other.begin(), other.end());
  ASSERT_EQ(files, other);
  ASSERT_GT(files.size(), 5u);
  for (const auto& f : files) {
    EXPECT_EQ(ReadBytes(tmp / "one" / f), ReadBytes(tmp / "three" / f)) << f;
  }
}

TEST(Dataset, InterruptedWriterLeavesNoOutput) {
  testing::TempDir tmp;
  {
    DatasetWriter writer(SmallOptions(tmp / "ds", 2));
    writer.Append(MakeRows(2000));  // several shards in flight
  }
  EXPECT_FALSE(fs::exists(tmp / "ds"));
  EXPECT_THROW(DatasetReader(tmp / "ds"), Error);
  // A new writer for the same output starts over.
  WriteDataset(SmallOptions(tmp / "ds"), MakeRows(10));
  EXPECT_EQ(DatasetReader(tmp / "ds").manifest().rows(), 10u);
  EXPECT_FALSE(fs::exists(tmp / "ds.incomplete"));
}

TEST(Dataset, TheFreeSpaceCheckCountsCompressedBytesNotRaw) {
  // An 8 MiB filesystem and 40 MiB of raw zeros in 10 MiB shards: a raw
  // shard would not fit, a compressed one does.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  testing::TempDir tmp;
  const fs::path small = tmp / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=8m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here";
  }
  struct Unmount {
    fs::path at;
    ~Unmount() { ::umount(at.c_str()); }
  } unmount{small};
  DatasetWriterOptions o;
  o.out = small / "ds";
  o.schema = {{"x", DType::kFloat32}};
  o.shard_bytes = 10 << 20;
  o.threads = 2;
  Table t = Table::Empty(o.schema);
  for (int i = 0; i < (40 << 20) / 4; ++i) t.columns[0].AppendFloat(0);
  DatasetWriter w(o);
  w.Append(t);
  const Manifest m = w.Commit();
  EXPECT_EQ(m.rows(), uint64_t(40 << 20) / 4);
  EXPECT_GE(m.shards.size(), 4u);
  EXPECT_LT(m.bytes(), uint64_t{1} << 20);
  // Data that does not compress is still refused before the disk fills.
  DatasetWriterOptions noise = o;
  noise.out = small / "noise";
  Table n = Table::Empty(o.schema);
  PhiloxStream rng(3);
  for (int i = 0; i < (12 << 20) / 4; ++i) n.columns[0].AppendFloat(rng.NextDouble());
  try {
    DatasetWriter nw(noise);
    nw.Append(n);
    nw.Commit();
    FAIL() << "12 MiB of noise fit in 8 MiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), ::testing::HasSubstr("not enough free space"));
  }
}

TEST(Dataset, EmptyDatasetCommits) {
  testing::TempDir tmp;
  DatasetWriter writer(SmallOptions(tmp / "ds"));
  const Manifest m = writer.Commit();
  EXPECT_EQ(m.rows(), 0u);
  EXPECT_TRUE(m.shards.empty());
  const DatasetReader reader(tmp / "ds");
  EXPECT_EQ(reader.num_shards(), 0u);
  EXPECT_TRUE(reader.manifest().stats.at("label").quantiles.empty());
  EXPECT_NO_THROW(reader.Verify());
  EXPECT_THROW(writer.Commit(), Error);
}

TEST(Dataset, BadOptionsAreConfigErrors) {
  testing::TempDir tmp;
  DatasetWriterOptions o = SmallOptions(tmp / "ds");
  o.group_column = "label";  // float32
  try {
    DatasetWriter w(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(e.Message().find("int64 or string"), std::string::npos) << e.Message();
  }
  o.group_column = "qdi";
  EXPECT_THROW(DatasetWriter{o}, Error);
  EXPECT_FALSE(fs::exists(tmp / "ds.incomplete")) << "options are checked before touching disk";
  fs::create_directories(tmp / "ds");
  try {
    DatasetWriter w(SmallOptions(tmp / "ds"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
  }
}

TEST(Dataset, ShardsOpenLazilyAndConcurrently) {
  testing::TempDir tmp;
  WriteDataset(SmallOptions(tmp / "ds"), MakeRows(1000));
  const DatasetReader reader(tmp / "ds");
  std::vector<const ShardReader*> seen(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] { seen[t] = &reader.shard(reader.num_shards() - 1); });
  }
  for (auto& t : threads) t.join();
  for (const auto* s : seen) EXPECT_EQ(s, seen.front());
  EXPECT_THROW(reader.shard(reader.num_shards()), Error);
}

TEST(Dataset, VerifyFindsAFlippedByte) {
  testing::TempDir tmp;
  WriteDataset(SmallOptions(tmp / "ds"), MakeRows(1000));
  const fs::path shard = tmp / "ds" / "shard-00001.tshard";
  std::string bytes = ReadBytes(shard);
  const DatasetReader before(tmp / "ds");
  const uint64_t chunk = before.shard(1).row_group(1).chunks[2].offset;  // title, row group 1
  bytes[chunk + 70] ^= 0x01;
  WriteBytes(shard, bytes);
  const std::string message = VerifyError(tmp / "ds");
  EXPECT_NE(message.find("shard-00001.tshard"), std::string::npos) << message;
  EXPECT_NE(message.find("\"title\""), std::string::npos) << message;
  EXPECT_NE(message.find("row group 1"), std::string::npos) << message;
  EXPECT_NE(message.find("byte " + std::to_string(chunk)), std::string::npos) << message;
}

TEST(Dataset, VerifyFindsATruncatedShard) {
  testing::TempDir tmp;
  WriteDataset(SmallOptions(tmp / "ds"), MakeRows(1000));
  const fs::path shard = tmp / "ds" / "shard-00002.tshard";
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size - 10);
  const std::string message = VerifyError(tmp / "ds");
  EXPECT_NE(message.find("shard-00002.tshard: byte " + std::to_string(size - 10)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  fs::remove(shard);
  EXPECT_NE(VerifyError(tmp / "ds").find("missing"), std::string::npos);
}

TEST(Dataset, VerifyFindsATamperedManifest) {
  testing::TempDir tmp;
  WriteDataset(SmallOptions(tmp / "ds"), MakeRows(1000));
  const fs::path manifest = tmp / "ds" / kManifestFile;
  const std::string original = ReadBytes(manifest);

  nlohmann::json j = nlohmann::json::parse(original);
  j["shards"][1]["sha256"] = std::string(64, '0');
  WriteBytes(manifest, j.dump(2));
  std::string message = VerifyError(tmp / "ds");
  EXPECT_NE(message.find("shard-00001.tshard"), std::string::npos) << message;
  EXPECT_NE(message.find("SHA-256 mismatch"), std::string::npos) << message;

  // Two entries swapped: each file is intact, but not the one described.
  j = nlohmann::json::parse(original);
  std::swap(j["shards"][0]["file"], j["shards"][1]["file"]);
  WriteBytes(manifest, j.dump(2));
  message = VerifyError(tmp / "ds");
  EXPECT_NE(message.find("shard-00001.tshard"), std::string::npos) << message;

  // An inconsistent manifest fails on open, naming the field.
  j = nlohmann::json::parse(original);
  j["shards"][0]["rows"] = j["shards"][0]["rows"].get<uint64_t>() + 1;
  WriteBytes(manifest, j.dump(2));
  try {
    DatasetReader reader(tmp / "ds");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("manifest.json: \"rows\""), std::string::npos) << e.Message();
  }
}

}  // namespace
}  // namespace topspin
