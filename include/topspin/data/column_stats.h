// Per-column statistics of a dataset, recorded in its manifest and used by
// transforms (standardize needs mean/std, bucketize needs quantile edges).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/data/column.h"

namespace topspin {

inline constexpr int kQuantileEdges = 65;  // q(0), q(1/64), ..., q(1): 16-64 buckets

struct ColumnStats {
  uint64_t count = 0;  // rows
  uint64_t nulls = 0;     // null rows (and NaN in float columns)
  uint64_t infinite = 0;  // +inf and -inf values (float columns)
  // Over finite non-null values of numeric/bool columns; of row lengths
  // (bytes or tokens) for string and token columns. All 0 when there is no
  // such value. Infinite values are counted above and left out here, so
  // that every statistic a transform uses is finite.
  double min = 0, max = 0, mean = 0, std = 0;
  // kQuantileEdges edges from a deterministic sample of up to
  // ColumnStatsBuilder::kSampleSize values (rank error about 1/sqrt(size));
  // empty when there is no value.
  std::vector<double> quantiles;
};

// Accumulates ColumnStats over any number of chunks. Merge() combines
// builders filled from disjoint parts (threads, shards); the result does
// not depend on how rows were split across builders as long as the
// (row id -> value) pairs are the same: the sample keeps the values with
// the smallest keyed hash of their row id (the global row index, or for
// imported rows their input and position, topspin/data/importer.h).
class ColumnStatsBuilder {
 public:
  static constexpr size_t kSampleSize = 16384;

  explicit ColumnStatsBuilder(uint64_t seed = 0);
  // first_row: the global index of column row 0 (for the sample keys).
  void Add(const Column& column, uint64_t first_row);
  // row_ids[r]: the sample key's input for row r (one per row; an
  // importer's ImportRowId, or the row's global index).
  void Add(const Column& column, std::span<const uint64_t> row_ids);
  void Merge(const ColumnStatsBuilder& other);
  ColumnStats Finish() const;

  // The whole state (counts, moments, sample) as bytes, and back, so that
  // builders of separate processes merge exactly (`topspin dataset merge`).
  // Deserialize throws Error kData naming `source` for bytes it did not
  // write.
  std::string Serialize() const;
  static ColumnStatsBuilder Deserialize(std::string_view bytes, const std::string& source);

 private:
  template <typename RowId>
  void AddRows(const Column& column, RowId&& row_id);
  void AddValue(double value, uint64_t row);

  uint64_t seed_;
  uint64_t count_ = 0, nulls_ = 0, infinite_ = 0, values_ = 0;
  double min_ = 0, max_ = 0, mean_ = 0, m2_ = 0;  // Welford / Chan et al. merge
  std::vector<std::pair<uint64_t, double>> sample_;  // (key, value) candidates, < 2 x kSampleSize
};

}  // namespace topspin
