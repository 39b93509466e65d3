// Config: YAML -> validated, typed values, with overrides and a stable hash.
//
// A Schema lists every key topspin understands ("pipeline.threads"), its
// type, default, range or choices, and a one-line doc. Config::Load reads a
// YAML file against it:
//   - unknown keys are errors naming the YAML line and the likely intended
//     key ("did you mean pipeline.threads?");
//   - values are type- and range-checked;
//   - keys the file omits take the schema default;
//   - overrides "a.b.c=value" (from --set, applied in order) win over the file.
// The resolved config prints as YAML (ToYaml) and has a hash that depends
// only on meaning: key order, formatting, comments and spelling of numbers
// (1e-3 vs 0.001) do not change it; keys marked not `hashed` (where output
// goes, how often to log) are left out of it.
// A Config is immutable after loading and safe to read from many threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "topspin/core/error.h"

namespace topspin {

enum class ValueType { kBool, kInt, kFloat, kString, kStringList, kIntList };
const char* ValueTypeName(ValueType type);

using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>,
                                 std::vector<int64_t>>;

// One key of the schema.
struct FieldSpec {
  std::string key;  // dotted path, e.g. "pipeline.threads"
  ValueType type = ValueType::kString;
  ConfigValue default_value;
  std::optional<double> min;         // inclusive, kInt and kFloat; each item of a kIntList
  std::optional<double> max;         // inclusive, kInt and kFloat; each item of a kIntList
  std::vector<std::string> choices;  // allowed values of a kString
  // kString: throws Error{kConfig} (what and hint) when the text is not
  // valid; the loader adds where (file, line, key). Run on every load, so
  // `config check` refuses what training would.
  std::function<void(std::string_view text)> check;
  std::string doc;
  bool hashed = true;  // false: does not change results (paths, log cadence)
};

class Schema {
 public:
  // Adds a section header (for docs) and fields. Throws on a duplicate key.
  Schema& Section(std::string name, std::string doc);
  Schema& Add(FieldSpec field);

  const FieldSpec* Find(std::string_view key) const;
  const std::vector<FieldSpec>& fields() const { return fields_; }
  const std::vector<std::pair<std::string, std::string>>& sections() const { return sections_; }
  // True when some key starts with `prefix + "."`.
  bool IsGroup(std::string_view prefix) const;
  // The distinct names one level below `prefix` ("" for top level).
  std::vector<std::string> ChildNames(std::string_view prefix) const;
  std::vector<std::string> Keys() const;

  // A Markdown table of every key, type, default, range and doc.
  std::string ToMarkdown() const;

 private:
  std::vector<std::pair<std::string, std::string>> sections_;
  std::vector<FieldSpec> fields_;
};

// Where a resolved value came from.
struct ValueOrigin {
  enum class Kind { kDefault, kFile, kOverride } kind = Kind::kDefault;
  std::string file;  // kFile
  int64_t line = 0;  // kFile, 1-based
  std::string text;  // kOverride: the "--set" text
  std::string Format() const;
};

class Config {
 public:
  // Reads `path` (YAML). Throws Error{kConfig} with file, line and key, or
  // Error{kIo} if the file cannot be read.
  static Config Load(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                     const Schema& schema);
  // Same from text; `source` names it in errors ("<embedded demo>").
  static Config Parse(std::string_view yaml, std::string source,
                      const std::vector<std::string>& overrides, const Schema& schema);
  // Only defaults and overrides.
  static Config Defaults(const std::vector<std::string>& overrides, const Schema& schema);

  bool GetBool(std::string_view key) const;
  int64_t GetInt(std::string_view key) const;
  double GetFloat(std::string_view key) const;
  const std::string& GetString(std::string_view key) const;
  const std::vector<std::string>& GetStringList(std::string_view key) const;
  const std::vector<int64_t>& GetIntList(std::string_view key) const;
  const ConfigValue& Get(std::string_view key) const;
  const ValueOrigin& Origin(std::string_view key) const;

  // Resolved config as YAML, in schema order. With origins, each value not
  // a default carries a comment saying where it was set; a key in `notes`
  // carries its note instead (the tuner's reasons). `only_set`: the keys
  // set by the file or an override, and those in `notes`; no defaults.
  std::string ToYaml(bool with_origins = false,
                     const std::map<std::string, std::string, std::less<>>& notes = {},
                     bool only_set = false) const;
  // "key=value" per hashed key, sorted by key: the text Hash() digests.
  std::string CanonicalText() const;
  // xxh3-64 of CanonicalText(), 16 hex digits.
  std::string Hash() const;

  // `error` located where its field was set: a kConfig error thrown after
  // loading (a cross-key rule) that names a key but no file gets the file
  // and line that set the key, when a file did. Any other error as it is.
  Error Locate(const Error& error) const;

  const std::string& source() const { return source_; }
  const Schema& schema() const { return *schema_; }

 private:
  struct Entry {
    ConfigValue value;
    ValueOrigin origin;
  };
  explicit Config(const Schema& schema, std::string source);
  const Entry& Lookup(std::string_view key, ValueType type) const;
  void ApplyOverride(const std::string& text);

  const Schema* schema_;
  std::string source_;
  std::map<std::string, Entry, std::less<>> values_;

  friend class ConfigBuilder;
};

// Canonical text of one value (shortest round-trip for floats).
std::string FormatConfigValue(const ConfigValue& value);

}  // namespace topspin
