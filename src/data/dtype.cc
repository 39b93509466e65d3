#include "topspin/data/dtype.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "topspin/core/strings.h"

namespace topspin {
namespace {

constexpr std::array<std::pair<std::string_view, DType>, 5> kAliases = {{
    {"float", DType::kFloat32},
    {"double", DType::kFloat64},
    {"int", DType::kInt64},
    {"str", DType::kString},
    {"bytes", DType::kString},
}};

constexpr size_t kDTypeCount = static_cast<size_t>(kLastDType) + 1;

DType FromIndex(size_t i) {
  return static_cast<DType>(i);
}

std::vector<std::string> CanonicalNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kDTypeCount; ++i) names.emplace_back(DTypeName(FromIndex(i)));
  return names;
}

// Canonical names first, so a typo close to both a name and an alias
// suggests the canonical name (ClosestMatch prefers earlier candidates).
std::vector<std::string> AcceptedNames() {
  std::vector<std::string> names = CanonicalNames();
  for (const auto& [alias, dtype] : kAliases) names.emplace_back(alias);
  return names;
}

Error UnknownDType(std::string_view name, const ErrorWhere& where) {
  const std::string valid = Join(CanonicalNames(), ", ");
  const auto guess = ClosestMatch(name, AcceptedNames());
  std::string hint = guess ? fmt::format("did you mean \"{}\"? ", *guess) : std::string();
  hint += fmt::format("valid dtypes: {}", valid);
  return ConfigError(fmt::format("unknown dtype \"{}\"", name), where, std::move(hint));
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kString: return "string";
    case DType::kTokensU16: return "tokens_u16";
    case DType::kTokensU32: return "tokens_u32";
  }
  return "invalid";
}

DType ParseDType(std::string_view name, const ErrorWhere& where) {
  for (size_t i = 0; i < kDTypeCount; ++i) {
    if (name == DTypeName(FromIndex(i))) return FromIndex(i);
  }
  for (const auto& [alias, dtype] : kAliases) {
    if (name == alias) return dtype;
  }
  throw UnknownDType(name, where);
}

size_t FixedWidth(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kTokensU32: return 4;
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kUInt8:
    case DType::kBool: return 1;
    case DType::kTokensU16: return 2;
    case DType::kString: return 0;
  }
  return 0;
}

bool IsNumeric(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8: return true;
    case DType::kBool:
    case DType::kString:
    case DType::kTokensU16:
    case DType::kTokensU32: return false;
  }
  return false;
}

bool IsVariableLength(DType dtype) {
  return dtype == DType::kString || dtype == DType::kTokensU16 || dtype == DType::kTokensU32;
}

std::optional<DType> DTypeFromByte(uint8_t byte) {
  if (byte > static_cast<uint8_t>(kLastDType)) return std::nullopt;
  return static_cast<DType>(byte);
}

}  // namespace topspin
