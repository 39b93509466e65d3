#include "topspin/core/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/config_value.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/hash.h"
#include "topspin/core/strings.h"

namespace topspin {

using config_internal::ConvertNode;
using config_internal::ConvertScalar;
using config_internal::DescribeNode;
using config_internal::YamlValue;

std::string ValueOrigin::Format() const {
  switch (kind) {
    case Kind::kDefault: return "default";
    case Kind::kFile: return fmt::format("{}:{}", file, line);
    case Kind::kOverride: return fmt::format("--set {}", text);
  }
  return "";
}

namespace {

ErrorWhere WhereOf(const std::string& file, const YAML::Mark& mark, const std::string& key) {
  ErrorWhere where{.file = file, .field = key};
  if (mark.line >= 0) {
    where.line = mark.line + 1;
    where.column = mark.column + 1;
  }
  return where;
}

// "did you mean" for a key that is not in the schema: a sibling with a
// similar name first, then any key ending in the same name (right name,
// wrong section).
std::string SuggestKey(const Schema& schema, const std::string& prefix, const std::string& name) {
  const std::string dot = prefix.empty() ? "" : prefix + ".";
  if (auto sibling = ClosestMatch(name, schema.ChildNames(prefix))) {
    return fmt::format("did you mean \"{}{}\"?", dot, *sibling);
  }
  for (const auto& key : schema.Keys()) {
    const std::string last = key.substr(key.rfind('.') + 1);
    if (last == name) return fmt::format("did you mean \"{}\"?", key);
  }
  return fmt::format("valid keys{}: {}; `topspin config schema` lists them all",
                     prefix.empty() ? "" : " in \"" + prefix + "\"",
                     Join(schema.ChildNames(prefix), ", "));
}

}  // namespace

// ---- loading ---------------------------------------------------------------------

// Walks a YAML document and fills a Config's entries, checking every key.
class ConfigBuilder {
 public:
  ConfigBuilder(Config* config, std::string file) : config_(config), file_(std::move(file)) {}

  void Walk(const YAML::Node& map, const std::string& prefix) {
    for (const auto& kv : map) {
      const YAML::Node& key_node = kv.first;
      const YAML::Node& value = kv.second;
      const std::string name = key_node.Scalar();
      const std::string key = prefix.empty() ? name : prefix + "." + name;
      const ErrorWhere where = WhereOf(file_, key_node.Mark(), key);
      if (auto [it, fresh] = seen_.emplace(key, where.line.value_or(0)); !fresh) {
        throw ConfigError("key appears twice", where,
                          fmt::format("the first is on line {}; keep one", it->second));
      }
      const Schema& schema = *config_->schema_;
      if (const FieldSpec* spec = schema.Find(key)) {
        auto& entry = config_->values_.at(key);
        entry.value = ConvertNode(*spec, value, where);
        entry.origin = {ValueOrigin::Kind::kFile, file_, where.line.value_or(0), {}};
      } else if (schema.IsGroup(key)) {
        if (value.IsMap()) {
          Walk(value, key);
        } else if (!value.IsNull()) {
          throw ConfigError(
              fmt::format("\"{}\" is a section and needs keys below it, got {}", key,
                          DescribeNode(value)),
              where, fmt::format("keys in \"{}\": {}", key, Join(schema.ChildNames(key), ", ")));
        }
      } else {
        throw ConfigError("unknown key", where, SuggestKey(schema, prefix, name));
      }
    }
  }

 private:
  Config* config_;
  std::string file_;
  std::map<std::string, int64_t> seen_;
};

Config::Config(const Schema& schema, std::string source)
    : schema_(&schema), source_(std::move(source)) {
  for (const auto& f : schema.fields()) values_.emplace(f.key, Entry{f.default_value, {}});
}

Config Config::Defaults(const std::vector<std::string>& overrides, const Schema& schema) {
  Config config(schema, "<defaults>");
  for (const auto& o : overrides) config.ApplyOverride(o);
  return config;
}

Config Config::Parse(std::string_view yaml, std::string source,
                     const std::vector<std::string>& overrides, const Schema& schema) {
  Config config(schema, source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    ErrorWhere where{.file = source};
    if (e.mark.line >= 0) {
      where.line = e.mark.line + 1;
      where.column = e.mark.column + 1;
    }
    throw ConfigError(fmt::format("not valid YAML: {}", e.msg), where,
                      "check indentation and quoting near that line");
  }
  if (root.IsDefined() && !root.IsNull()) {
    if (!root.IsMap()) {
      throw ConfigError("the top level must be a mapping of sections",
                        WhereOf(source, root.Mark(), ""),
                        fmt::format("sections: {}", Join(schema.ChildNames(""), ", ")));
    }
    ConfigBuilder(&config, source).Walk(root, "");
  }
  for (const auto& o : overrides) config.ApplyOverride(o);
  return config;
}

Config Config::Load(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                    const Schema& schema) {
  if (!std::filesystem::exists(path)) {
    throw IoError("config file not found", ErrorWhere{.file = path.string()},
                  "check the path; `topspin config schema` lists every key with its default");
  }
  return Parse(ReadFile(path), path.string(), overrides, schema);
}

void Config::ApplyOverride(const std::string& text) {
  const size_t eq = text.find('=');
  const ErrorWhere where{.file = "--set " + text};
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("an override must look like KEY=VALUE", where,
                      "for example --set pipeline.threads=8");
  }
  const std::string key(Trim(std::string_view(text).substr(0, eq)));
  const std::string raw(Trim(std::string_view(text).substr(eq + 1)));
  const FieldSpec* spec = schema_->Find(key);
  if (spec == nullptr) {
    const auto guess = ClosestMatch(key, schema_->Keys());
    throw ConfigError("unknown key", ErrorWhere{.file = where.file, .field = key},
                      guess ? fmt::format("did you mean \"{}\"?", *guess)
                            : "`topspin config schema` lists every key");
  }
  const ErrorWhere key_where{.file = where.file, .field = key};
  ConfigValue value;
  if (spec->type == ValueType::kStringList || spec->type == ValueType::kIntList) {
    YAML::Node node;
    try {
      node = YAML::Load(raw);
    } catch (const YAML::Exception& e) {
      throw ConfigError(fmt::format("not a valid list: {}", e.msg), key_where, "write [a, b]");
    }
    // A scalar is comma-separated items: --set model.top=128,64.
    if (!node.IsScalar()) {
      value = ConvertNode(*spec, node, key_where);
    } else if (spec->type == ValueType::kStringList) {
      value = Split(raw, ',');
    } else {
      value = ConvertScalar(*spec, raw, key_where);
    }
  } else {
    std::string scalar = raw;
    if (scalar.size() >= 2 && (scalar.front() == '"' || scalar.front() == '\'') &&
        scalar.back() == scalar.front()) {
      scalar = scalar.substr(1, scalar.size() - 2);
    }
    value = ConvertScalar(*spec, scalar, key_where);
  }
  auto& entry = values_.at(key);
  entry.value = std::move(value);
  entry.origin = {ValueOrigin::Kind::kOverride, {}, 0, text};
}

// ---- access -------------------------------------------------------------------------

const Config::Entry& Config::Lookup(std::string_view key, ValueType type) const {
  const auto it = values_.find(key);
  const FieldSpec* spec = schema_->Find(key);
  if (it == values_.end() || spec == nullptr) {
    throw InternalError(fmt::format("config key \"{}\" is not in the schema", key));
  }
  if (spec->type != type) {
    throw InternalError(fmt::format("config key \"{}\" is {}, read as {}", key,
                                    ValueTypeName(spec->type), ValueTypeName(type)));
  }
  return it->second;
}

bool Config::GetBool(std::string_view key) const {
  return std::get<bool>(Lookup(key, ValueType::kBool).value);
}
int64_t Config::GetInt(std::string_view key) const {
  return std::get<int64_t>(Lookup(key, ValueType::kInt).value);
}
double Config::GetFloat(std::string_view key) const {
  return std::get<double>(Lookup(key, ValueType::kFloat).value);
}
const std::string& Config::GetString(std::string_view key) const {
  return std::get<std::string>(Lookup(key, ValueType::kString).value);
}
const std::vector<std::string>& Config::GetStringList(std::string_view key) const {
  return std::get<std::vector<std::string>>(Lookup(key, ValueType::kStringList).value);
}
const std::vector<int64_t>& Config::GetIntList(std::string_view key) const {
  return std::get<std::vector<int64_t>>(Lookup(key, ValueType::kIntList).value);
}
Error Config::Locate(const Error& error) const {
  ErrorWhere where = error.where();
  if (error.kind() != ErrorKind::kConfig || !where.file.empty() ||
      schema_->Find(where.field) == nullptr) {
    return error;
  }
  const ValueOrigin& origin = Origin(where.field);
  if (origin.kind != ValueOrigin::Kind::kFile) return error;
  where.file = origin.file;
  where.line = origin.line;
  return Error(error.kind(), error.what_text(), std::move(where), error.hint());
}

const ConfigValue& Config::Get(std::string_view key) const {
  const FieldSpec* spec = schema_->Find(key);
  if (spec == nullptr)
    throw InternalError(fmt::format("config key \"{}\" is not in the schema", key));
  return Lookup(key, spec->type).value;
}
const ValueOrigin& Config::Origin(std::string_view key) const {
  const FieldSpec* spec = schema_->Find(key);
  if (spec == nullptr)
    throw InternalError(fmt::format("config key \"{}\" is not in the schema", key));
  return Lookup(key, spec->type).origin;
}

// ---- output ----------------------------------------------------------------------------

std::string Config::ToYaml(bool with_origins,
                           const std::map<std::string, std::string, std::less<>>& notes,
                           bool only_set) const {
  std::string out;
  std::vector<std::string> open;  // path components of the current group
  for (const auto& f : schema_->fields()) {
    if (only_set && values_.at(f.key).origin.kind == ValueOrigin::Kind::kDefault &&
        notes.find(f.key) == notes.end()) {
      continue;
    }
    const std::vector<std::string> parts = Split(f.key, '.');
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out += fmt::format("{:{}}{}:\n", "", 2 * i, parts[i]);
      open.push_back(parts[i]);
    }
    const Entry& e = values_.at(f.key);
    out += fmt::format("{:{}}{}: {}", "", 2 * (parts.size() - 1), parts.back(), YamlValue(e.value));
    if (const auto note = notes.find(f.key); note != notes.end()) {
      out += "  # " + note->second;
    } else if (with_origins && e.origin.kind != ValueOrigin::Kind::kDefault) {
      out += "  # " + e.origin.Format();
    }
    out += "\n";
  }
  return out;
}

std::string Config::CanonicalText() const {
  std::string out;
  for (const auto& [key, entry] : values_) {  // std::map: sorted by key
    if (!schema_->Find(key)->hashed) continue;
    out += fmt::format("{}={}\n", key, YamlValue(entry.value));
  }
  return out;
}

std::string Config::Hash() const {
  return HexU64(Xxh3(CanonicalText()));
}

}  // namespace topspin
