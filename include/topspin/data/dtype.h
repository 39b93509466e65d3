// Column types of the shard format.
//
// A DType names what one column of a shard stores. Its numeric value is
// written to disk (the first byte of every chunk header), so the values
// below are part of the on-disk format: never renumber or reuse them; add
// new types at the end. Validate a byte read from disk with DTypeFromByte().
//
// Scalar types store one value per row. kString and the token types are
// variable-length: each row is a run of bytes (kString) or of tokens
// (kTokensU16, kTokensU32) located through a per-column offsets array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "topspin/core/error.h"

namespace topspin {

enum class DType : uint8_t {
  kFloat32 = 0,    // IEEE-754 binary32, little-endian
  kFloat64 = 1,    // IEEE-754 binary64, little-endian
  kInt32 = 2,      // two's complement, little-endian
  kInt64 = 3,      // two's complement, little-endian
  kUInt8 = 4,      // one unsigned byte
  kBool = 5,       // one byte, 0 or 1
  kString = 6,     // variable-length UTF-8 (or raw) bytes per row
  kTokensU16 = 7,  // variable-length list of uint16 token ids per row
  kTokensU32 = 8,  // variable-length list of uint32 token ids per row
};

// The largest valid DType; every byte value above it is invalid on disk.
inline constexpr DType kLastDType = DType::kTokensU32;

// Canonical lower-case name: "float32", "float64", "int32", "int64",
// "uint8", "bool", "string", "tokens_u16", "tokens_u32". This is the name
// manifests and `topspin inspect` print, and ParseDType() accepts it back.
const char* DTypeName(DType dtype);

// The DType called `name`: a canonical name or one of the aliases "float"
// (float32), "double" (float64), "int" (int64), "str" and "bytes" (string).
// Names are case-sensitive. Throws Error kConfig at `where` for any other
// name, with a "did you mean" hint when the name is a likely typo.
DType ParseDType(std::string_view name, const ErrorWhere& where = {});

// Bytes per value: 4 for float32/int32, 8 for float64/int64, 1 for
// uint8/bool, and for token lists the width of one token (2 or 4). 0 for
// kString, whose values have no fixed width.
size_t FixedWidth(DType dtype);

// True for the number types float32, float64, int32, int64 and uint8.
// bool, string and token lists are not numeric (as in Apache Arrow).
bool IsNumeric(DType dtype);

// True for kString, kTokensU16 and kTokensU32 (rows have their own length).
bool IsVariableLength(DType dtype);

// The DType stored as `byte` on disk, or nullopt when no DType has that
// value (a damaged file or one written by a newer topspin).
std::optional<DType> DTypeFromByte(uint8_t byte);

}  // namespace topspin
