#include "data/column_buffer.h"

#include <limits>
#include <utility>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

template <typename T>
void PutNaN(std::vector<std::byte>& values) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const size_t at = values.size();
  values.resize(at + sizeof(T));
  std::memcpy(values.data() + at, &nan, sizeof(T));
}

}  // namespace

ColumnBuffer::ColumnBuffer(ColumnSpec spec) : spec_(std::move(spec)) {
  if (spec_.dtype == DType::kTokensU16 || spec_.dtype == DType::kTokensU32) {
    throw InternalError(
        fmt::format("ColumnBuffer \"{}\": token columns are not supported", spec_.name));
  }
  if (spec_.dtype == DType::kString) offsets_.push_back(0);
}

bool ColumnBuffer::IsValid(size_t row) const {
  return validity_.empty() || ((validity_[row / 8] >> (row % 8)) & 1u) != 0;
}

void ColumnBuffer::MaterializeValidity() {
  // Bits past the last row stay 0, so equal columns have equal bitmaps.
  validity_.assign(rows_ / 8 + 1, 0xFF);
  validity_.back() = static_cast<uint8_t>((1u << (rows_ % 8)) - 1);
}

void ColumnBuffer::SetValidBit(bool valid) {
  if (rows_ / 8 >= validity_.size()) validity_.push_back(0);
  const auto bit = static_cast<uint8_t>(1u << (rows_ % 8));
  if (valid) {
    validity_[rows_ / 8] |= bit;
  } else {
    validity_[rows_ / 8] &= static_cast<uint8_t>(~bit);
  }
}

void ColumnBuffer::Reserve(size_t rows) {
  if (spec_.dtype == DType::kString) {
    offsets_.reserve(offsets_.size() + rows);
  } else {
    values_.reserve(values_.size() + rows * FixedWidth(spec_.dtype));
  }
}

void ColumnBuffer::AppendNull() {
  switch (spec_.dtype) {
    case DType::kFloat32: PutNaN<float>(values_); break;
    case DType::kFloat64: PutNaN<double>(values_); break;
    case DType::kString: offsets_.push_back(offsets_.back()); break;
    default: values_.resize(values_.size() + FixedWidth(spec_.dtype)); break;
  }
  if (validity_.empty()) MaterializeValidity();
  SetValidBit(false);
  ++rows_;
}

void ColumnBuffer::AppendString(std::string_view bytes) {
  char* out = StartString(bytes.size());
  if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  FinishString(bytes.size());
}

char* ColumnBuffer::StartString(size_t max_bytes) {
  values_.resize(offsets_.back() + max_bytes);
  return reinterpret_cast<char*>(values_.data() + offsets_.back());
}

void ColumnBuffer::FinishString(size_t bytes) {
  values_.resize(offsets_.back() + bytes);
  offsets_.push_back(values_.size());
  MarkValid();
}

void ColumnBuffer::Truncate(size_t rows) {
  if (rows >= rows_) return;
  if (spec_.dtype == DType::kString) {
    offsets_.resize(rows + 1);
    values_.resize(offsets_.back());
  } else {
    values_.resize(rows * FixedWidth(spec_.dtype));
  }
  if (!validity_.empty()) {
    validity_.resize(rows / 8 + 1);
    validity_.back() &= static_cast<uint8_t>((1u << (rows % 8)) - 1);
  }
  rows_ = rows;
}

void ColumnBuffer::AppendRows(const ColumnBuffer& other, size_t begin, size_t end) {
  if (other.dtype() != spec_.dtype) {
    throw InternalError(
        fmt::format("ColumnBuffer \"{}\": appending rows of another dtype", spec_.name));
  }
  if (begin >= end) return;
  if (spec_.dtype == DType::kString) {
    const uint64_t from = other.offsets_[begin], to = other.offsets_[end];
    const uint64_t base = values_.size();
    values_.insert(values_.end(), other.values_.begin() + static_cast<ptrdiff_t>(from),
                   other.values_.begin() + static_cast<ptrdiff_t>(to));
    for (size_t r = begin + 1; r <= end; ++r) offsets_.push_back(base + other.offsets_[r] - from);
  } else {
    const size_t width = FixedWidth(spec_.dtype);
    values_.insert(values_.end(), other.values_.begin() + static_cast<ptrdiff_t>(begin * width),
                   other.values_.begin() + static_cast<ptrdiff_t>(end * width));
  }
  if (other.validity_.empty() && validity_.empty()) {
    rows_ += end - begin;
    return;
  }
  if (validity_.empty()) MaterializeValidity();
  for (size_t r = begin; r < end; ++r) {
    SetValidBit(other.IsValid(r));
    ++rows_;
  }
}

Column ColumnBuffer::Build() {
  std::vector<uint8_t> validity;
  if (!validity_.empty()) {
    validity = std::move(validity_);
    validity.resize((rows_ + 7) / 8);
  }
  std::vector<uint64_t> offsets;
  if (spec_.dtype == DType::kString) offsets = std::move(offsets_);
  Column column = Column::FromBuffers(spec_, rows_, std::move(validity), std::move(values_),
                                      std::move(offsets));
  rows_ = 0;
  validity_.clear();
  values_.clear();
  offsets_.clear();
  if (spec_.dtype == DType::kString) offsets_.push_back(0);
  return column;
}

std::vector<ColumnBuffer> MakeColumnBuffers(const std::vector<ColumnSpec>& schema) {
  std::vector<ColumnBuffer> out;
  out.reserve(schema.size());
  for (const auto& spec : schema) out.emplace_back(spec);
  return out;
}

}  // namespace topspin
