// Schema (declared in topspin/core/config.h): the keys a Config accepts.
#include <algorithm>

#include <fmt/format.h>

#include "core/config_value.h"
#include "topspin/core/config.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {

using config_internal::YamlValue;

Schema& Schema::Section(std::string name, std::string doc) {
  sections_.emplace_back(std::move(name), std::move(doc));
  return *this;
}

Schema& Schema::Add(FieldSpec field) {
  if (Find(field.key) != nullptr) throw InternalError("schema: duplicate key " + field.key);
  fields_.push_back(std::move(field));
  return *this;
}

const FieldSpec* Schema::Find(std::string_view key) const {
  for (const auto& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

bool Schema::IsGroup(std::string_view prefix) const {
  const std::string p = std::string(prefix) + ".";
  return std::any_of(fields_.begin(), fields_.end(),
                     [&](const FieldSpec& f) { return f.key.starts_with(p); });
}

std::vector<std::string> Schema::ChildNames(std::string_view prefix) const {
  const std::string p = prefix.empty() ? "" : std::string(prefix) + ".";
  std::vector<std::string> names;
  for (const auto& f : fields_) {
    if (!f.key.starts_with(p)) continue;
    std::string rest = f.key.substr(p.size());
    rest = rest.substr(0, rest.find('.'));
    if (std::find(names.begin(), names.end(), rest) == names.end()) names.push_back(rest);
  }
  return names;
}

std::vector<std::string> Schema::Keys() const {
  std::vector<std::string> keys;
  for (const auto& f : fields_) keys.push_back(f.key);
  return keys;
}

std::string Schema::ToMarkdown() const {
  std::string out;
  for (const auto& [section, doc] : sections_) {
    out += fmt::format("## `{}`\n\n{}\n\n", section, doc);
    out += "| key | type | default | allowed | what it does |\n|---|---|---|---|---|\n";
    for (const auto& f : fields_) {
      if (!f.key.starts_with(section + ".")) continue;
      std::string allowed;
      if (!f.choices.empty()) {
        allowed = Join(f.choices, ", ");
      } else if (f.min || f.max) {
        const auto bound = [&](std::optional<double> b) {
          return b ? (f.type != ValueType::kFloat ? fmt::format("{}", static_cast<int64_t>(*b))
                                                : fmt::format("{}", *b))
                   : std::string();
        };
        allowed = fmt::format("{} .. {}", bound(f.min), bound(f.max));
      }
      std::string def = YamlValue(f.default_value);
      std::replace(def.begin(), def.end(), '|', '/');
      out += fmt::format("| `{}` | {} | `{}` | {} | {}{} |\n", f.key, ValueTypeName(f.type), def,
                         allowed, f.doc, f.hashed ? "" : " (not part of the config hash)");
    }
    out += "\n";
  }
  return out;
}

}  // namespace topspin
