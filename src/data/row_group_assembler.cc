#include "data/row_group_assembler.h"

#include <algorithm>
#include <utility>

#include "topspin/core/error.h"

namespace topspin {

uint64_t RawBytes(const Table& table) {
  uint64_t bytes = 0;
  for (const auto& c : table.columns) {
    bytes += c.validity().size() + c.offsets().size_bytes() + c.values().size();
  }
  return bytes;
}

RowGroupAssembler::RowGroupAssembler(const std::vector<ColumnSpec>& schema, int group_column,
                                     uint64_t target_rows)
    : schema_(schema),
      group_column_(group_column),
      target_rows_(std::max<uint64_t>(1, target_rows)),
      pending_(Table::Empty(schema)) {
  if (group_column >= 0) {
    const DType dtype = schema.at(group_column).dtype;
    if (dtype != DType::kInt64 && dtype != DType::kString) {
      throw InternalError("RowGroupAssembler: the group column must be int64 or string");
    }
  }
}

bool RowGroupAssembler::StartsGroup(const Column& column, size_t row) const {
  if (!in_group_) return true;
  const bool valid = column.IsValid(row);
  if (valid != key_valid_) return true;
  if (!valid) return false;  // consecutive nulls form one group
  if (column.dtype() == DType::kInt64) return column.Values<int64_t>()[row] != key_int_;
  return column.StringAt(row) != key_string_;
}

void RowGroupAssembler::RememberGroup(const Column& column, size_t row) {
  in_group_ = true;
  key_valid_ = column.IsValid(row);
  if (!key_valid_) return;
  if (column.dtype() == DType::kInt64) {
    key_int_ = column.Values<int64_t>()[row];
  } else {
    key_string_.assign(column.StringAt(row));
  }
}

void RowGroupAssembler::EndGroup() {
  if (!in_group_ || group_length_ == 0) return;
  min_length_ = groups_ == 0 ? group_length_ : std::min(min_length_, group_length_);
  max_length_ = std::max(max_length_, group_length_);
  ++groups_;
  grouped_rows_ += group_length_;
  group_length_ = 0;
}

ClosedRowGroup RowGroupAssembler::TakePending() {
  ClosedRowGroup out{.rows = std::exchange(pending_, Table::Empty(schema_)),
                     .first_row = pending_first_row_,
                     .groups = std::exchange(pending_groups_, 0),
                     .raw_bytes = 0,
                     .row_ids = std::exchange(pending_ids_, {})};
  out.raw_bytes = RawBytes(out.rows);
  pending_first_row_ = rows_;
  return out;
}

void RowGroupAssembler::Append(const Table& rows, std::span<const uint64_t> row_ids,
                               std::vector<ClosedRowGroup>& closed) {
  const Column* group = group_column_ >= 0 ? &rows.columns[group_column_] : nullptr;
  for (size_t r = 0; r < rows.rows(); ++r) {
    const bool starts_group = group == nullptr || StartsGroup(*group, r);
    if (starts_group && pending_.rows() > 0 && (pending_.rows() >= target_rows_ || break_pending_))
      closed.push_back(TakePending());
    if (starts_group) break_pending_ = false;
    pending_ids_.push_back(row_ids.empty() ? rows_ : row_ids[r]);
    if (group != nullptr && starts_group) {
      EndGroup();
      RememberGroup(*group, r);
      ++pending_groups_;
    }
    pending_.AppendRow(rows, r);
    ++group_length_;
    ++rows_;
  }
}

std::optional<ClosedRowGroup> RowGroupAssembler::Finish() {
  if (group_column_ >= 0) EndGroup();
  if (pending_.rows() == 0) return std::nullopt;
  return TakePending();
}

GroupStats RowGroupAssembler::group_stats() const {
  GroupStats g;
  g.groups = groups_;
  g.min_length = min_length_;
  g.max_length = max_length_;
  g.mean_length = groups_ == 0 ? 0 : static_cast<double>(grouped_rows_) / groups_;
  return g;
}

}  // namespace topspin
