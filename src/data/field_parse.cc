#include "data/field_parse.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace topspin {
namespace {

std::string_view StripPlus(std::string_view text) {
  // from_chars rejects '+'; accept "+5" but not "+-5" or a lone "+".
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

template <typename T>
bool ParseWhole(std::string_view text, T* out) {
  text = StripPlus(text);
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

bool ParseInt64(std::string_view text, int64_t* out) {
  return ParseWhole(text, out);
}

bool ParseFloat64(std::string_view text, double* out) {
  return ParseWhole(text, out);
}

bool ParseFloat32(std::string_view text, float* out) {
  if (ParseWhole(text, out)) return true;
  // from_chars reports underflow as out of range: round tiny values instead.
  double wide = 0;
  if (!ParseWhole(text, &wide)) return false;
  if (std::isfinite(wide) && std::fabs(wide) <= std::numeric_limits<float>::max()) {
    *out = static_cast<float>(wide);
    return true;
  }
  return false;
}

bool ParseBool(std::string_view text, bool digits, bool* out) {
  if (text == "true" || text == "True" || text == "TRUE" || (digits && text == "1")) {
    *out = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE" || (digits && text == "0")) {
    *out = false;
    return true;
  }
  return false;
}

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

size_t InvalidUtf8Offset(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + 1 >= n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string QuoteForMessage(std::string_view text, size_t max_bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += text.size() > max_bytes ? "\"..." : "\"";
  return out;
}

std::string DescribeDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64: return fmt::format("a number ({})", DTypeName(dtype));
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8: return fmt::format("an integer ({})", DTypeName(dtype));
    case DType::kBool: return "true or false (bool)";
    case DType::kString: return "UTF-8 text (string)";
    default: return DTypeName(dtype);
  }
}

}  // namespace topspin
