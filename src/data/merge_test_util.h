// Test helpers for convert parts and merge (data and parquet tests).
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/import_test_util.h"
#include "topspin/data/convert.h"
#include "topspin/data/dataset.h"
#include "topspin/data/merge.h"

namespace topspin::testing {

// Every row of a dataset, in order, in one table.
inline Table ReadAllRows(const std::filesystem::path& dir) {
  DatasetReader reader(dir);
  Table all = Table::Empty(reader.manifest().schema);
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    for (size_t g = 0; g < shard.num_row_groups(); ++g) {
      const Table rows = shard.ReadRowGroup(g);
      for (size_t r = 0; r < rows.rows(); ++r) all.AppendRow(rows, r);
    }
  }
  return all;
}

// Rows of every row group, in dataset order (what the pipeline's units are
// made of).
inline std::vector<uint64_t> RowGroupRows(const std::filesystem::path& dir) {
  DatasetReader reader(dir);
  std::vector<uint64_t> rows;
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    for (size_t g = 0; g < shard.num_row_groups(); ++g) rows.push_back(shard.row_group(g).rows);
  }
  return rows;
}

// A merged dataset against a single convert of the same input: the same
// rows, row groups, groups and statistics (mean and std to rounding).
inline void ExpectSameDataset(const std::filesystem::path& single,
                              const std::filesystem::path& merged) {
  const Manifest a = Manifest::Load(single), b = Manifest::Load(merged);
  ASSERT_EQ(a.schema, b.schema);
  EXPECT_EQ(a.label_column, b.label_column);
  EXPECT_EQ(a.group_column, b.group_column);
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.raw_bytes(), b.raw_bytes());
  EXPECT_EQ(a.group_stats.groups, b.group_stats.groups);
  EXPECT_EQ(a.group_stats.min_length, b.group_stats.min_length);
  EXPECT_EQ(a.group_stats.max_length, b.group_stats.max_length);
  EXPECT_DOUBLE_EQ(a.group_stats.mean_length, b.group_stats.mean_length);
  for (const auto& [name, x] : a.stats) {
    const ColumnStats& y = b.stats.at(name);
    EXPECT_EQ(x.count, y.count) << name;
    EXPECT_EQ(x.nulls, y.nulls) << name;
    EXPECT_EQ(x.infinite, y.infinite) << name;
    EXPECT_EQ(x.min, y.min) << name;
    EXPECT_EQ(x.max, y.max) << name;
    EXPECT_EQ(x.quantiles, y.quantiles) << name;
    EXPECT_NEAR(x.mean, y.mean, 1e-12 * (1 + std::fabs(x.mean))) << name;
    EXPECT_NEAR(x.std, y.std, 1e-12 * (1 + std::fabs(x.std))) << name;
  }
  EXPECT_EQ(RowGroupRows(single), RowGroupRows(merged));
  ExpectSameTable(ReadAllRows(single), ReadAllRows(merged));
}

// Writer options with small row groups and shards, so that a few hundred
// rows make many of both.
inline DatasetWriterOptions SmallShards(const std::filesystem::path& out, uint64_t row_group_rows,
                                        uint64_t shard_bytes) {
  DatasetWriterOptions w;
  w.out = out;
  w.threads = 2;
  w.row_group_rows = row_group_rows;
  w.shard_bytes = shard_bytes;
  return w;
}

// Converts `inputs` as `parts` parts under `dir`/part-K and merges them
// into `dir`/merged; returns the merged directory.
inline std::filesystem::path ConvertInParts(const std::vector<std::filesystem::path>& inputs,
                                            ImportOptions options, DatasetWriterOptions writer,
                                            uint32_t parts, const std::filesystem::path& dir) {
  MergeOptions merge;
  for (uint32_t k = 0; k < parts; ++k) {
    options.part = k;
    options.parts = parts;
    writer.out = dir / ("part-" + std::to_string(k));
    Convert(inputs, options, writer, false, {});
    merge.parts.push_back(writer.out);
  }
  merge.out = dir / "merged";
  MergeParts(merge);
  return merge.out;
}

}  // namespace topspin::testing
