// Columns and tables in memory: what importers produce, shard writers
// store, shard readers return and the pipeline transforms.
//
// Layout of a Column with `rows` rows (also the uncompressed layout of a
// column chunk on disk, see docs/FORMAT.md):
//   validity  bitmap, bit (r % 8) of byte (r / 8) set when row r holds a
//             value; empty when the column has no nulls (all valid).
//   fixed     (float32, float64, int32, int64, uint8, bool) `values`: rows *
//             FixedWidth(dtype) bytes, little-endian; a null row holds 0
//             (float columns store NaN there too, so kernels that ignore the
//             bitmap see NaN: see docs/FORMAT.md "Nulls").
//   variable  (string, tokens_u16, tokens_u32) `offsets`: rows + 1 uint64,
//             offsets[0] == 0, non-decreasing, in bytes (string) or tokens;
//             `values`: the concatenated bytes or tokens. A null row is empty.
// A Column owns its buffers. Not thread-safe for writing; concurrent reads
// of a Column nobody writes are fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/data/dtype.h"

namespace topspin {

struct ColumnSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  bool operator==(const ColumnSpec&) const = default;
};

class Column {
 public:
  Column() = default;
  explicit Column(ColumnSpec spec);

  const ColumnSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  DType dtype() const { return spec_.dtype; }
  size_t size() const { return rows_; }
  size_t null_count() const { return nulls_; }

  void Reserve(size_t rows, size_t value_bytes = 0);
  void Clear();

  // Appending. Each checks the dtype and throws Error{kInternal} on a
  // mismatch (a caller bug, not bad data).
  void AppendNull();
  void AppendFloat(double value);  // float32 or float64 columns
  void AppendInt(int64_t value);  // int32 (range-checked), int64, uint8 (range-checked), bool (0/1)
  void AppendString(std::string_view value);
  void AppendTokens(std::span<const uint32_t> tokens);  // tokens_u16 checks every token < 65536
  // Copies row `row` of `other` (same dtype) to the end of this column.
  void AppendRow(const Column& other, size_t row);

  // Reading.
  bool IsValid(size_t row) const;
  // Typed view of a fixed-width column; T must match the dtype
  // (float, double, int32_t, int64_t, uint8_t, and uint8_t for bool).
  template <typename T>
  std::span<const T> Values() const;
  // Any numeric or bool value as a double (null rows: NaN).
  double AsDouble(size_t row) const;
  // Row `row` of a string column (null: empty).
  std::string_view StringAt(size_t row) const;
  // Tokens of row `row` of a token column, widened to uint32.
  std::vector<uint32_t> TokensAt(size_t row) const;

  // Raw buffers, as laid out above.
  std::span<const uint8_t> validity() const { return validity_; }
  std::span<const std::byte> values() const { return values_; }
  std::span<const uint64_t> offsets() const { return offsets_; }

  // Builds a column from raw buffers (a shard reader's decoded chunk) and
  // checks that they are consistent: buffer sizes, offsets monotone and in
  // range, bool values 0/1. Throws Error{kData} describing the first
  // inconsistency (the caller adds file, column and offset).
  static Column FromBuffers(ColumnSpec spec, size_t rows, std::vector<uint8_t> validity,
                            std::vector<std::byte> values, std::vector<uint64_t> offsets);

  // The raw buffers, moved out with their capacity so a reader can decode
  // the next chunk into the same memory (no allocation, no page faults).
  struct Buffers {
    std::vector<uint8_t> validity;
    std::vector<std::byte> values;
    std::vector<uint64_t> offsets;
  };
  // Leaves the column empty (no rows, no buffers).
  Buffers TakeBuffers();

 private:
  void MarkValidity(bool valid);
  void CheckType(bool ok, const char* what) const;

  ColumnSpec spec_;
  size_t rows_ = 0;
  size_t nulls_ = 0;
  std::vector<uint8_t> validity_;  // empty while every row is valid
  std::vector<std::byte> values_;
  std::vector<uint64_t> offsets_;  // variable-length types only
};

// The runs of equal consecutive values of a column: a ranking dataset's
// lists are the runs of its group column. A null differs from every value
// and equals the nulls next to it.
struct ColumnRuns {
  uint64_t runs = 0;     // 0 only for an empty column
  uint64_t longest = 0;  // rows in the longest run
};
ColumnRuns CountRuns(const Column& column);
// Where each run begins, and then size(): [runs + 1] row offsets.
std::vector<uint32_t> RunStarts(const Column& column);

// A set of equally long columns: an import chunk or a row group.
struct Table {
  std::vector<Column> columns;

  size_t rows() const { return columns.empty() ? 0 : columns.front().size(); }
  std::vector<ColumnSpec> schema() const;
  // The column called `name`, or nullptr.
  const Column* Find(std::string_view name) const;
  // An empty table with these columns.
  static Table Empty(const std::vector<ColumnSpec>& schema);
  // Appends row `row` of `other` (same schema) to every column.
  void AppendRow(const Table& other, size_t row);
};

}  // namespace topspin
