#include "core/config_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "topspin/core/strings.h"

namespace topspin {

const char* ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kBool: return "bool";
    case ValueType::kInt: return "int";
    case ValueType::kFloat: return "float";
    case ValueType::kString: return "string";
    case ValueType::kStringList: return "list of strings";
    case ValueType::kIntList: return "list of ints";
  }
  return "?";
}

std::string FormatConfigValue(const ConfigValue& value) {
  return config_internal::YamlValue(value);
}

namespace config_internal {

// ---- formatting -------------------------------------------------------------

namespace {

bool LooksLikeNonString(std::string_view s) {
  static const std::set<std::string, std::less<>> kReserved = {
      "true",  "false", "yes", "no", "on",  "off",  "null", "~",    "True",
      "False", "Yes",   "No",  "On", "Off", "Null", "NULL", "TRUE", "FALSE"};
  if (kReserved.contains(s)) return true;
  double d;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// YAML text of a string scalar: plain when unambiguous, double-quoted otherwise.
std::string YamlString(std::string_view s) {
  const bool plain = !s.empty() && !LooksLikeNonString(s) && s.front() != ' ' && s.back() != ' ' &&
                     s.find_first_of(":#{}[],&*!|>'\"%@`\\\n\t") == s.npos && s.front() != '-' &&
                     s.front() != '?';
  if (plain) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string FormatFloat(double v) {
  if (v == 0.0) v = 0.0;  // -0 and 0 mean the same
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a float in YAML
  return s;
}

}  // namespace

std::string YamlValue(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, double>) {
          return FormatFloat(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return YamlString(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::vector<std::string> items;
          for (const auto& item : v) items.push_back(YamlString(item));
          return "[" + Join(items, ", ") + "]";
        } else {
          std::vector<std::string> items;
          for (const int64_t item : v) items.push_back(fmt::format("{}", item));
          return "[" + Join(items, ", ") + "]";
        }
      },
      value);
}

// ---- conversion -----------------------------------------------------------------

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

void CheckRange(const FieldSpec& spec, double v, const std::string& text, const ErrorWhere& where) {
  const bool low = spec.min && v < *spec.min;
  const bool high = spec.max && v > *spec.max;
  if (!low && !high) return;
  const auto fmt_bound = [&](double b) {
    return spec.type != ValueType::kFloat ? fmt::format("{}", static_cast<int64_t>(b))
                                          : fmt::format("{}", b);
  };
  std::string range;
  if (spec.min && spec.max) {
    range = fmt::format("between {} and {}", fmt_bound(*spec.min), fmt_bound(*spec.max));
  } else if (spec.min) {
    range = fmt::format("at least {}", fmt_bound(*spec.min));
  } else {
    range = fmt::format("at most {}", fmt_bound(*spec.max));
  }
  throw ConfigError(fmt::format("value {} is out of range: must be {}", text, range), where,
                    fmt::format("{} (default {})", spec.doc, YamlValue(spec.default_value)));
}

// `text` as a 64-bit integer in spec's range; `wrong_type()` is the error
// for text that is not one.
template <typename WrongType>
int64_t ConvertInt(const FieldSpec& spec, const std::string& text, const ErrorWhere& where,
                   const WrongType& wrong_type) {
  std::string_view s = text;
  if (s.starts_with('+')) s.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(fmt::format("integer \"{}\" does not fit in 64 bits", text), where);
  }
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) throw wrong_type();
  CheckRange(spec, static_cast<double>(v), text, where);
  return v;
}

}  // namespace

std::string DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    default: return fmt::format("\"{}\"", node.Scalar());
  }
}

ConfigValue ConvertScalar(const FieldSpec& spec, const std::string& text, const ErrorWhere& where) {
  const auto wrong_type = [&] {
    return ConfigError(fmt::format("expected {}, got \"{}\"", ValueTypeName(spec.type), text),
                       where,
                       fmt::format("{} (default {})", spec.doc, YamlValue(spec.default_value)));
  };
  switch (spec.type) {
    case ValueType::kBool: {
      const std::string t = Lower(text);
      if (t == "true" || t == "yes" || t == "on") return true;
      if (t == "false" || t == "no" || t == "off") return false;
      throw wrong_type();
    }
    case ValueType::kInt: return ConvertInt(spec, text, where, wrong_type);
    case ValueType::kFloat: {
      std::string_view s = text;
      if (s.starts_with('+')) s.remove_prefix(1);
      double v = 0;
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) throw wrong_type();
      if (!std::isfinite(v))
        throw ConfigError(fmt::format("value \"{}\" is not finite", text), where);
      CheckRange(spec, v, text, where);
      return v;
    }
    case ValueType::kString: {
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        const auto guess = ClosestMatch(text, spec.choices);
        throw ConfigError(fmt::format("\"{}\" is not one of: {}", text, Join(spec.choices, ", ")),
                          where, guess ? fmt::format("did you mean \"{}\"?", *guess) : spec.doc);
      }
      if (spec.check) {
        try {
          spec.check(text);
        } catch (const Error& e) {
          throw ConfigError(e.what_text(), where, e.hint());
        }
      }
      return text;
    }
    case ValueType::kStringList: return std::vector<std::string>{text};
    case ValueType::kIntList: {
      // "128,64" (spaces allowed; "" is none): the form of --set and of
      // configs written before the lists.
      std::vector<int64_t> items;
      if (Trim(text).empty()) return items;
      for (const std::string& piece : Split(text, ',')) {
        const std::string item(Trim(piece));
        items.push_back(ConvertInt(spec, item, where, [&] {
          return ConfigError(fmt::format("\"{}\" in \"{}\" is not an integer", item, text), where,
                             fmt::format("{} (default {})", spec.doc,
                                         YamlValue(spec.default_value)));
        }));
      }
      return items;
    }
  }
  throw InternalError("unhandled value type");
}

ConfigValue ConvertNode(const FieldSpec& spec, const YAML::Node& node, const ErrorWhere& where) {
  if (spec.type == ValueType::kStringList) {
    if (node.IsNull()) return std::vector<std::string>{};
    if (!node.IsSequence()) {
      throw ConfigError(fmt::format("expected a list of strings, got {}", DescribeNode(node)),
                        where, "write a list as [a, b]; quote items that hold \":\", e.g. [\"price: log1p\"]");
    }
    std::vector<std::string> items;
    for (const auto& item : node) {
      if (!item.IsScalar()) {
        throw ConfigError(fmt::format("list items must be strings, got {}", DescribeNode(item)),
                          where);
      }
      items.push_back(item.Scalar());
    }
    return items;
  }
  if (spec.type == ValueType::kIntList && !node.IsScalar()) {
    if (node.IsNull()) return std::vector<int64_t>{};
    if (!node.IsSequence()) {
      throw ConfigError(fmt::format("expected a list of ints, got {}", DescribeNode(node)), where,
                        "write a list as [128, 64]");
    }
    std::vector<int64_t> items;
    for (const auto& item : node) {
      if (!item.IsScalar()) {
        throw ConfigError(fmt::format("list items must be integers, got {}", DescribeNode(item)),
                          where);
      }
      const std::string& text = item.Scalar();
      items.push_back(ConvertInt(spec, text, where, [&] {
        return ConfigError(fmt::format("list item \"{}\" is not an integer", text), where,
                           "write a list as [128, 64]");
      }));
    }
    return items;
  }
  if (!node.IsScalar()) {
    throw ConfigError(
        fmt::format("expected {}, got {}", ValueTypeName(spec.type), DescribeNode(node)), where,
        fmt::format("{} (default {})", spec.doc, YamlValue(spec.default_value)));
  }
  return ConvertScalar(spec, node.Scalar(), where);
}

}  // namespace config_internal
}  // namespace topspin
