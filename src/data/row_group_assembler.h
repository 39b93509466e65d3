// Internal to DatasetWriter: cuts a stream of rows into row groups.
//
// A row group closes at the first group boundary at or after `target_rows`
// rows, so a group (a run of consecutive rows with the same group-column
// value; null is a value of its own) is never split. Without a group column
// every row group has exactly `target_rows` rows but the last. Also keeps
// the statistics of group lengths. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/manifest.h"

namespace topspin {

struct ClosedRowGroup {
  Table rows;
  uint64_t first_row = 0;  // global index of rows' row 0
  uint64_t groups = 0;     // groups starting in this row group (0 without a group column)
  uint64_t raw_bytes = 0;  // RawBytes(rows)
  std::vector<uint64_t> row_ids;  // the statistics sample's key input per row
};

// Bytes of the uncompressed column buffers (validity, offsets, values).
uint64_t RawBytes(const Table& table);

class RowGroupAssembler {
 public:
  // group_column: index into `schema` (int64 or string), or -1 for none.
  RowGroupAssembler(const std::vector<ColumnSpec>& schema, int group_column, uint64_t target_rows);

  // Appends `rows` (same schema) and moves every row group they complete
  // to the end of `closed`, in order. `row_ids` has one id per row, or is
  // empty: then each row's id is its global index.
  void Append(const Table& rows, std::span<const uint64_t> row_ids,
              std::vector<ClosedRowGroup>& closed);
  // The pending row group closes at the next group start (the next row
  // without a group column), whatever its size.
  void BreakAtNextGroup() { break_pending_ = true; }
  // Closes the pending row group (nullopt when empty) and the last group.
  std::optional<ClosedRowGroup> Finish();

  uint64_t rows() const { return rows_; }
  // Lengths of finished groups; complete after Finish().
  GroupStats group_stats() const;

 private:
  // True when row `row` of `column` starts a new group (always for the first row).
  bool StartsGroup(const Column& column, size_t row) const;
  void RememberGroup(const Column& column, size_t row);
  void EndGroup();
  ClosedRowGroup TakePending();

  std::vector<ColumnSpec> schema_;
  int group_column_;
  uint64_t target_rows_;
  Table pending_;
  uint64_t pending_first_row_ = 0;
  uint64_t pending_groups_ = 0;
  std::vector<uint64_t> pending_ids_;
  bool break_pending_ = false;
  uint64_t rows_ = 0;

  // The current group: its key and length so far.
  bool in_group_ = false;
  bool key_valid_ = false;
  int64_t key_int_ = 0;
  std::string key_string_;
  uint64_t group_length_ = 0;
  // Finished groups.
  uint64_t groups_ = 0, grouped_rows_ = 0, min_length_ = 0, max_length_ = 0;
};

}  // namespace topspin
