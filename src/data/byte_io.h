// Little-endian binary state files of the data module (internal): the
// statistics builder's state and a convert part's files (dataset_part.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {

// Appends the bytes of `value` (little-endian hosts only, docs/FORMAT.md).
template <typename T>
void PutBytes(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Bounds-checked reads; every failure is Error kData naming `source`, the
// field and the byte offset. The bytes must outlive the cursor.
class ByteCursor {
 public:
  ByteCursor(std::string_view bytes, std::string source, std::string prefix = {})
      : bytes_(bytes), source_(std::move(source)), prefix_(std::move(prefix)) {}

  template <typename T>
  T Get(const char* field) {
    T value;
    std::memcpy(&value, Take(sizeof(T), field).data(), sizeof(T));
    return value;
  }
  std::string_view Take(size_t n, const char* field) {
    if (bytes_.size() - pos_ < n) Fail(field, "is cut short");
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  // Reads 8 bytes and checks them against `magic`.
  void Magic(const char (&magic)[8], const char* what) {
    if (Take(8, "magic") != std::string_view(magic, 8)) Fail("magic", what);
  }
  size_t left() const { return bytes_.size() - pos_; }

  [[noreturn]] void Fail(const char* field, const char* what) const {
    throw DataError(fmt::format("{}{} {}", prefix_, field, what),
                    ErrorWhere{.file = source_, .field = field, .byte_offset = int64_t(pos_)},
                    "it was not written by this topspin, or is damaged: convert it again");
  }

 private:
  std::string_view bytes_;
  std::string source_;
  std::string prefix_;
  size_t pos_ = 0;
};

}  // namespace topspin
