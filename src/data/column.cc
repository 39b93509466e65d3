#include "topspin/data/column.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/simd.h"

namespace topspin {
namespace {

template <typename T>
void PutValue(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T GetValue(const std::vector<std::byte>& in, size_t index) {
  T value;
  std::memcpy(&value, in.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  return DType::kUInt8;
}

}  // namespace

Column::Column(ColumnSpec spec) : spec_(std::move(spec)) {
  if (IsVariableLength(spec_.dtype)) offsets_.push_back(0);
}

void Column::Reserve(size_t rows, size_t value_bytes) {
  if (IsVariableLength(spec_.dtype)) {
    offsets_.reserve(rows + 1);
    values_.reserve(value_bytes);
  } else {
    values_.reserve(rows * FixedWidth(spec_.dtype));
  }
}

void Column::Clear() {
  rows_ = nulls_ = 0;
  validity_.clear();
  values_.clear();
  offsets_.clear();
  if (IsVariableLength(spec_.dtype)) offsets_.push_back(0);
}

void Column::CheckType(bool ok, const char* what) const {
  if (!ok) {
    throw InternalError(
        fmt::format("column \"{}\" is {}: cannot {}", spec_.name, DTypeName(spec_.dtype), what));
  }
}

void Column::MarkValidity(bool valid) {
  if (!valid && validity_.empty()) {
    // Every earlier row was valid; bits past the last row stay 0 so equal
    // columns have byte-identical bitmaps.
    validity_.assign((rows_ + 8) / 8, 0xFF);
    validity_.back() = static_cast<uint8_t>((1u << (rows_ % 8)) - 1);
  }
  if (!validity_.empty()) {
    if (rows_ / 8 >= validity_.size()) validity_.push_back(0);
    if (valid) {
      validity_[rows_ / 8] |= static_cast<uint8_t>(1u << (rows_ % 8));
    } else {
      validity_[rows_ / 8] &= static_cast<uint8_t>(~(1u << (rows_ % 8)));
    }
  }
  if (!valid) ++nulls_;
  ++rows_;
}

void Column::AppendNull() {
  switch (spec_.dtype) {
    case DType::kFloat32: PutValue(values_, std::numeric_limits<float>::quiet_NaN()); break;
    case DType::kFloat64: PutValue(values_, std::numeric_limits<double>::quiet_NaN()); break;
    case DType::kString:
    case DType::kTokensU16:
    case DType::kTokensU32: offsets_.push_back(offsets_.back()); break;
    default: values_.resize(values_.size() + FixedWidth(spec_.dtype)); break;
  }
  MarkValidity(false);
}

void Column::AppendFloat(double value) {
  if (spec_.dtype == DType::kFloat32) {
    PutValue(values_, static_cast<float>(value));
  } else {
    CheckType(spec_.dtype == DType::kFloat64, "append a float");
    PutValue(values_, value);
  }
  MarkValidity(true);
}

void Column::AppendInt(int64_t value) {
  switch (spec_.dtype) {
    case DType::kInt64: PutValue(values_, value); break;
    case DType::kInt32:
      CheckType(value >= INT32_MIN && value <= INT32_MAX, "hold a value outside int32");
      PutValue(values_, static_cast<int32_t>(value));
      break;
    case DType::kUInt8:
      CheckType(value >= 0 && value <= 255, "hold a value outside 0..255");
      PutValue(values_, static_cast<uint8_t>(value));
      break;
    case DType::kBool:
      CheckType(value == 0 || value == 1, "hold a bool other than 0 or 1");
      PutValue(values_, static_cast<uint8_t>(value));
      break;
    default: CheckType(false, "append an integer");
  }
  MarkValidity(true);
}

void Column::AppendString(std::string_view value) {
  CheckType(spec_.dtype == DType::kString, "append a string");
  const size_t at = values_.size();
  values_.resize(at + value.size());
  if (!value.empty()) std::memcpy(values_.data() + at, value.data(), value.size());
  offsets_.push_back(values_.size());
  MarkValidity(true);
}

void Column::AppendTokens(std::span<const uint32_t> tokens) {
  if (spec_.dtype == DType::kTokensU16) {
    for (uint32_t t : tokens) {
      CheckType(t <= 0xFFFF, "hold a token id above 65535 (use tokens_u32)");
      PutValue(values_, static_cast<uint16_t>(t));
    }
  } else {
    CheckType(spec_.dtype == DType::kTokensU32, "append tokens");
    for (uint32_t t : tokens) PutValue(values_, t);
  }
  offsets_.push_back(offsets_.back() + tokens.size());
  MarkValidity(true);
}

void Column::AppendRow(const Column& other, size_t row) {
  CheckType(other.dtype() == spec_.dtype, "append a row of another dtype");
  if (!other.IsValid(row)) {
    AppendNull();
    return;
  }
  if (IsVariableLength(spec_.dtype)) {
    const size_t width = spec_.dtype == DType::kString ? 1 : FixedWidth(spec_.dtype);
    const uint64_t begin = other.offsets_[row], end = other.offsets_[row + 1];
    const size_t at = values_.size();
    values_.resize(at + (end - begin) * width);
    if (end > begin)
      std::memcpy(values_.data() + at, other.values_.data() + begin * width, (end - begin) * width);
    offsets_.push_back(offsets_.back() + (end - begin));
  } else {
    const size_t width = FixedWidth(spec_.dtype);
    const size_t at = values_.size();
    values_.resize(at + width);
    std::memcpy(values_.data() + at, other.values_.data() + row * width, width);
  }
  MarkValidity(true);
}

bool Column::IsValid(size_t row) const {
  return validity_.empty() || ((validity_[row / 8] >> (row % 8)) & 1u) != 0;
}

template <typename T>
std::span<const T> Column::Values() const {
  const bool ok =
      spec_.dtype == DTypeOf<T>() || (std::is_same_v<T, uint8_t> && spec_.dtype == DType::kBool);
  CheckType(ok, "be viewed as this C++ type");
  return {reinterpret_cast<const T*>(values_.data()), rows_};
}
template std::span<const float> Column::Values<float>() const;
template std::span<const double> Column::Values<double>() const;
template std::span<const int32_t> Column::Values<int32_t>() const;
template std::span<const int64_t> Column::Values<int64_t>() const;
template std::span<const uint8_t> Column::Values<uint8_t>() const;

double Column::AsDouble(size_t row) const {
  if (!IsValid(row)) return std::numeric_limits<double>::quiet_NaN();
  switch (spec_.dtype) {
    case DType::kFloat32: return GetValue<float>(values_, row);
    case DType::kFloat64: return GetValue<double>(values_, row);
    case DType::kInt32: return GetValue<int32_t>(values_, row);
    case DType::kInt64: return static_cast<double>(GetValue<int64_t>(values_, row));
    case DType::kUInt8:
    case DType::kBool: return GetValue<uint8_t>(values_, row);
    default: CheckType(false, "be read as a number");
  }
  return 0;
}

std::string_view Column::StringAt(size_t row) const {
  CheckType(spec_.dtype == DType::kString, "be read as a string");
  return {reinterpret_cast<const char*>(values_.data()) + offsets_[row],
          offsets_[row + 1] - offsets_[row]};
}

std::vector<uint32_t> Column::TokensAt(size_t row) const {
  const bool u16 = spec_.dtype == DType::kTokensU16;
  CheckType(u16 || spec_.dtype == DType::kTokensU32, "be read as tokens");
  std::vector<uint32_t> out;
  for (uint64_t i = offsets_[row]; i < offsets_[row + 1]; ++i) {
    out.push_back(u16 ? GetValue<uint16_t>(values_, i) : GetValue<uint32_t>(values_, i));
  }
  return out;
}

namespace column_internal {

size_t CountSetBits(const uint8_t* p, size_t bytes);

// Set bits in `bytes` bytes, eight at a time; compiled with POPCNT where the
// CPU has it (the baseline x86-64 calls libgcc per word).
TOPSPIN_VECTOR_CLONES
size_t CountSetBits(const uint8_t* p, size_t bytes) {
  size_t n = 0, i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    n += static_cast<size_t>(std::popcount(word));
  }
  for (; i < bytes; ++i) n += static_cast<size_t>(std::popcount(p[i]));
  return n;
}

}  // namespace column_internal

Column Column::FromBuffers(ColumnSpec spec, size_t rows, std::vector<uint8_t> validity,
                           std::vector<std::byte> values, std::vector<uint64_t> offsets) {
  Column c(std::move(spec));
  const auto bad = [&](const std::string& what) {
    return DataError(fmt::format("column \"{}\" ({}): {}", c.name(), DTypeName(c.dtype()), what));
  };
  if (!validity.empty() && validity.size() != (rows + 7) / 8) {
    throw bad(fmt::format("validity bitmap has {} bytes, {} rows need {}", validity.size(), rows,
                          (rows + 7) / 8));
  }
  size_t nulls = 0;
  if (!validity.empty()) {  // bits past the last row do not count
    size_t valid = column_internal::CountSetBits(validity.data(), rows / 8);
    if (rows % 8 != 0) {
      valid += std::popcount(static_cast<uint8_t>(validity[rows / 8] & ((1u << (rows % 8)) - 1)));
    }
    nulls = rows - valid;
  }
  if (IsVariableLength(c.dtype())) {
    if (offsets.empty() || offsets.size() - 1 != rows || offsets.front() != 0) {
      throw bad(fmt::format("{} offsets for {} rows (need rows + 1, starting at 0)", offsets.size(),
                            rows));
    }
    const size_t width = c.dtype() == DType::kString ? 1 : FixedWidth(c.dtype());
    for (size_t r = 0; r < rows; ++r) {
      if (offsets[r + 1] < offsets[r]) throw bad(fmt::format("offsets decrease at row {}", r));
    }
    // Divide rather than multiply: a damaged offset times the width can wrap
    // around to the values' size.
    if (values.size() % width != 0 || offsets.back() != values.size() / width) {
      throw bad(fmt::format("offsets end at {} but {} value bytes are present ({} per value)",
                            offsets.back(), values.size(), width));
    }
  } else {
    if (!offsets.empty()) throw bad("a fixed-width column has offsets");
    if (values.size() % FixedWidth(c.dtype()) != 0 ||
        values.size() / FixedWidth(c.dtype()) != rows) {
      throw bad(fmt::format("{} value bytes for {} rows of {} bytes", values.size(), rows,
                            FixedWidth(c.dtype())));
    }
    if (c.dtype() == DType::kBool) {
      for (size_t r = 0; r < rows; ++r) {
        if (static_cast<uint8_t>(values[r]) > 1)
          throw bad(fmt::format("bool value {} at row {}", int(values[r]), r));
      }
    }
  }
  c.rows_ = rows;
  c.nulls_ = nulls;
  if (nulls == 0) validity.clear();  // empty means all valid; keeps the capacity
  c.validity_ = std::move(validity);
  c.values_ = std::move(values);
  if (IsVariableLength(c.dtype())) c.offsets_ = std::move(offsets);
  return c;
}

Column::Buffers Column::TakeBuffers() {
  Buffers out{std::move(validity_), std::move(values_), std::move(offsets_)};
  validity_.clear();
  values_.clear();
  offsets_.clear();
  rows_ = 0;
  nulls_ = 0;
  return out;
}

std::vector<ColumnSpec> Table::schema() const {
  std::vector<ColumnSpec> out;
  for (const auto& c : columns) out.push_back(c.spec());
  return out;
}

const Column* Table::Find(std::string_view name) const {
  for (const auto& c : columns) {
    if (c.name() == name) return &c;
  }
  return nullptr;
}

Table Table::Empty(const std::vector<ColumnSpec>& schema) {
  Table t;
  for (const auto& spec : schema) t.columns.emplace_back(spec);
  return t;
}

void Table::AppendRow(const Table& other, size_t row) {
  for (size_t i = 0; i < columns.size(); ++i) columns[i].AppendRow(other.columns[i], row);
}

namespace {

// Calls start(r) for each row r in [1, size) that begins a new run.
template <typename Start>
void ForEachRunStart(const Column& column, Start start) {
  const size_t rows = column.size();
  const auto scan = [&](auto value) {
    if (column.null_count() == 0) {
      for (size_t r = 1; r < rows; ++r) {
        if (value(r) != value(r - 1)) start(r);
      }
      return;
    }
    for (size_t r = 1; r < rows; ++r) {
      const bool valid = column.IsValid(r);
      if (valid != column.IsValid(r - 1) || (valid && value(r) != value(r - 1))) start(r);
    }
  };
  switch (column.dtype()) {
    case DType::kString:
      scan([&](size_t r) { return column.StringAt(r); });
      break;
    case DType::kInt64:
      scan([v = column.Values<int64_t>()](size_t r) { return v[r]; });
      break;
    case DType::kInt32:
      scan([v = column.Values<int32_t>()](size_t r) { return v[r]; });
      break;
    default:
      scan([&](size_t r) { return column.AsDouble(r); });
  }
}

}  // namespace

ColumnRuns CountRuns(const Column& column) {
  if (column.size() == 0) return {};
  ColumnRuns out{.runs = 1, .longest = 0};
  size_t begin = 0;
  ForEachRunStart(column, [&](size_t r) {
    out.longest = std::max<uint64_t>(out.longest, r - begin);
    begin = r;
    ++out.runs;
  });
  out.longest = std::max<uint64_t>(out.longest, column.size() - begin);
  return out;
}

std::vector<uint32_t> RunStarts(const Column& column) {
  std::vector<uint32_t> starts = {0};
  ForEachRunStart(column, [&](size_t r) { starts.push_back(static_cast<uint32_t>(r)); });
  if (column.size() > 0) starts.push_back(static_cast<uint32_t>(column.size()));
  return starts;
}

}  // namespace topspin
