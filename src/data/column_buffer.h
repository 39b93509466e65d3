// ColumnBuffer: a column under construction, internal to the data module.
//
// Importers parse straight into these: the buffers are the raw layout of a
// Column (topspin/data/column.h: lazy validity bitmap, fixed-width values or
// offsets + bytes), appends do no type dispatch, a half-appended row can be
// rolled back with Truncate(), and row ranges of one buffer can be appended
// to another (chunk assembly). Build() hands the buffers to a Column.
// Not thread-safe; one buffer per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "topspin/data/column.h"

namespace topspin {

class ColumnBuffer {
 public:
  explicit ColumnBuffer(ColumnSpec spec);

  const ColumnSpec& spec() const { return spec_; }
  DType dtype() const { return spec_.dtype; }
  size_t size() const { return rows_; }

  // Makes room for `rows` more rows without regrowing (string bytes are
  // not reserved: their size is unknown).
  void Reserve(size_t rows);

  // A null row: 0 for integers and bool, NaN for floats, empty for strings.
  void AppendNull();
  // A value of a fixed-width column; sizeof(T) must be FixedWidth(dtype())
  // (float for float32, double for float64, int32_t, int64_t, uint8_t for
  // uint8 and bool). The caller checks ranges.
  template <typename T>
  void AppendFixed(T value) {
    const size_t at = values_.size();
    values_.resize(at + sizeof(T));
    std::memcpy(values_.data() + at, &value, sizeof(T));
    MarkValid();
  }
  // A row of a string column.
  void AppendString(std::string_view bytes);
  // Two-step string append for callers that produce the bytes themselves
  // (unescaping): write up to `max_bytes` at the returned pointer, then
  // FinishString with the number written. No other call in between.
  char* StartString(size_t max_bytes);
  void FinishString(size_t bytes);

  // Drops rows [rows, size()) (rolls back a row that turned out bad).
  void Truncate(size_t rows);
  // Appends rows [begin, end) of `other` (same dtype).
  void AppendRows(const ColumnBuffer& other, size_t begin, size_t end);
  // Moves the content into a Column and leaves this buffer empty.
  Column Build();

  // Raw access for tests.
  const std::vector<std::byte>& values() const { return values_; }

 private:
  void MarkValid() {
    if (!validity_.empty()) SetValidBit(true);
    ++rows_;
  }
  void SetValidBit(bool valid);
  bool IsValid(size_t row) const;
  void MaterializeValidity();

  ColumnSpec spec_;
  size_t rows_ = 0;
  std::vector<uint8_t> validity_;  // empty while every row is valid
  std::vector<std::byte> values_;
  std::vector<uint64_t> offsets_;  // string columns: rows_ + 1 entries
};

// One buffer per column of `schema`.
std::vector<ColumnBuffer> MakeColumnBuffers(const std::vector<ColumnSpec>& schema);

}  // namespace topspin
