// topspin dataset diff: do two dataset directories hold the same data?
//
// What a Spark conversion (scripts/spark/convert.py), a merge of parts or a
// re-run of convert is checked against: a single `topspin convert`.
//
// Exact (the default): the same schema, label and group columns, the same
// rows in the same order (every value bit for bit, nulls included), the
// same row-group sizes (hence the same pipeline sample order), the same
// group statistics, and the same column statistics: count, nulls,
// infinite, min, max and quantile edges exactly, mean and std to
// `stats_tolerance` relative (they are sums in another order). Shard
// boundaries may differ.
//
// By group (`by_group`): both datasets need the group column. Groups are
// matched by key; each must hold the same rows in the same order, wherever
// the group sits and however rows are cut into row groups and shards. This
// is the check for data that went through a shuffle (Spark's repartition by
// the group key). Statistics are compared as in exact mode, except the
// quantile edges, which come from a sample keyed by each row's input file
// and position and so differ when the rows came from other files.
//
// Both datasets are streamed row group by row group: exact mode holds two
// row groups, by-group mode one hash and row count per group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace topspin {

struct DatasetDiffOptions {
  bool by_group = false;
  double stats_tolerance = 1e-9;  // relative, for mean and std
  size_t max_differences = 10;    // stop listing (and reading rows) after this many
};

struct DatasetDiff {
  // Each difference as one line naming where it is: 'row 1041 (shard-00000,
  // row group 3, row 17), column "price": 12.5 vs 13'. Empty when equal.
  std::vector<std::string> differences;
  bool truncated = false;  // more differences than max_differences
  uint64_t rows = 0;       // rows compared (of the first dataset)
  uint64_t groups = 0;     // groups compared (by_group)
  bool equal() const { return differences.empty(); }
};

// Throws Error{kData}/{kIo} when a directory is not a readable dataset, and
// Error{kConfig} for by_group without a group column in both.
DatasetDiff DiffDatasets(const std::filesystem::path& a, const std::filesystem::path& b,
                         const DatasetDiffOptions& options = {});

}  // namespace topspin
