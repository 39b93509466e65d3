// Internal: JSON encoding details of manifest.json shared by Manifest's
// writer (manifest.cc) and parser (manifest_parse.cc).
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace topspin::manifest_json {

// The "format" field: tells a manifest from any other JSON file.
inline constexpr const char* kFormatName = "topspin-dataset";

// JSON has no infinities or NaN: they are written as the strings "inf",
// "-inf" and "nan"; every finite double is a JSON number (round-trip exact).
inline nlohmann::ordered_json EncodeDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// The inverse of EncodeDouble; nullopt when `j` is neither.
template <typename J>
std::optional<double> DecodeDouble(const J& j) {
  if (j.is_number()) return j.template get<double>();
  if (!j.is_string()) return std::nullopt;
  const auto& s = j.template get_ref<const std::string&>();
  if (s == "nan") return std::nan("");
  if (s == "inf") return HUGE_VAL;
  if (s == "-inf") return -HUGE_VAL;
  return std::nullopt;
}

}  // namespace topspin::manifest_json
