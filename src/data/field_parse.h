// Text -> typed values for the importers (internal to the data module).
//
// Numbers are parsed with std::from_chars: no locale, no allocation. The
// whole text must be the number (callers trim surrounding blanks first);
// a leading '+' is accepted. Floats accept "nan", "inf" and "infinity" in
// any case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "topspin/data/dtype.h"

namespace topspin {

bool ParseInt64(std::string_view text, int64_t* out);
// false for text that is not a number or overflows float (|x| > FLT_MAX);
// values below the smallest float round to a denormal or zero.
bool ParseFloat32(std::string_view text, float* out);
bool ParseFloat64(std::string_view text, double* out);
// Fast path for plain decimals ("-12.345", "7", ".5"): parses T (float or
// double) from [p, end) and sets *stop past the number. Only takes numbers
// it can round exactly as std::from_chars does (Clinger's fast path: a
// mantissa of at most 2^24 (float) or 2^53 (double) and at most 10 or 22
// decimals); returns false,
// leaving *out alone, for anything else (exponents, long mantissas, inf,
// nan), which the caller then hands to std::from_chars.
template <typename T>
bool ParseSimpleDecimal(const char* p, const char* end, T* out, const char** stop) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  constexpr uint64_t kMaxMantissa =
      std::is_same_v<T, float> ? uint64_t{1} << 24 : uint64_t{1} << 53;
  constexpr int kMaxExponent = std::is_same_v<T, float> ? 10 : 22;
  constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const bool negative = p < end && *p == '-';
  const char* q = negative ? p + 1 : p;
  uint64_t mantissa = 0;
  int digits = 0, fraction = 0;
  for (; q < end && static_cast<unsigned>(*q - '0') < 10; ++q, ++digits) {
    mantissa = mantissa * 10 + static_cast<unsigned>(*q - '0');
  }
  if (q < end && *q == '.') {
    for (++q; q < end && static_cast<unsigned>(*q - '0') < 10; ++q, ++digits, ++fraction) {
      mantissa = mantissa * 10 + static_cast<unsigned>(*q - '0');
    }
  }
  if (digits == 0 || digits > 19 || mantissa > kMaxMantissa || fraction > kMaxExponent) {
    return false;
  }
  if (q < end && (*q == 'e' || *q == 'E')) return false;
  // Both operands are exact, so IEEE division rounds correctly.
  const T value = static_cast<T>(mantissa) / static_cast<T>(kPow10[fraction]);
  *out = negative ? -value : value;
  *stop = q;
  return true;
}

// "true"/"false", "True"/"False", "TRUE"/"FALSE"; with `digits`, "1"/"0" too.
bool ParseBool(std::string_view text, bool digits, bool* out);

// Trims spaces and tabs on both ends.
std::string_view TrimBlanks(std::string_view text);

// Offset of the first byte that makes `text` invalid UTF-8 (overlong forms,
// surrogates, code points above U+10FFFF and truncated sequences are
// invalid), or npos when it is valid.
size_t InvalidUtf8Offset(std::string_view text);

// `text` for an error message: quoted, at most `max_bytes` bytes (then
// "..."), control characters and non-ASCII bytes as \xNN.
std::string QuoteForMessage(std::string_view text, size_t max_bytes = 40);

// What a column type accepts, for error messages: "an integer (int64)",
// "a number (float32)", "true or false (bool)"...
std::string DescribeDType(DType dtype);

}  // namespace topspin
