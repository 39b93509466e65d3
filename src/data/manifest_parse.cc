// Manifest::FromJson: parses manifest.json and checks every field, so code
// that reads a dataset can trust its manifest. Every error names the
// manifest file and the JSON field ("shards[3].sha256").
#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/manifest_json.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"
#include "topspin/data/manifest.h"

namespace topspin {
namespace {

using Json = nlohmann::json;

constexpr const char* kEditedHint =
    "manifest.json is damaged or was edited by hand: restore it or re-run topspin convert";

// Typed access to JSON fields, with the manifest path and the field's JSON
// path in every error.
class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  [[nodiscard]] Error Bad(const std::string& field, const std::string& what) const {
    return DataError(what, ErrorWhere{.file = source_, .field = field}, kEditedHint);
  }

  // `j` must be an object with exactly the fields `keys`.
  // `j` has every one of `keys`, and nothing but those and `optional`.
  void CheckObject(const Json& j, const std::string& path, const std::vector<std::string>& keys,
                   const std::vector<std::string>& optional = {}) const {
    if (!j.is_object()) throw Bad(path, fmt::format("expected an object, got {}", j.type_name()));
    for (const auto& [key, value] : j.items()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      if (std::find(optional.begin(), optional.end(), key) != optional.end()) continue;
      const auto guess = ClosestMatch(key, keys);
      throw DataError(fmt::format("unknown field \"{}\"", key),
                      ErrorWhere{.file = source_, .field = Field(path, key)},
                      guess ? fmt::format("did you mean \"{}\"?", *guess) : kEditedHint);
    }
    for (const auto& key : keys) {
      if (!j.contains(key)) throw Bad(Field(path, key), "missing required field");
    }
  }

  uint64_t U64(const Json& j, const std::string& field) const {
    if (!j.is_number_unsigned()) {
      throw Bad(field, fmt::format("expected a non-negative integer, got {}", j.dump()));
    }
    return j.get<uint64_t>();
  }

  double Double(const Json& j, const std::string& field) const {
    const auto v = manifest_json::DecodeDouble(j);
    if (!v) throw Bad(field, fmt::format("expected a number, got {}", j.dump()));
    return *v;
  }

  std::string String(const Json& j, const std::string& field) const {
    if (!j.is_string()) throw Bad(field, fmt::format("expected a string, got {}", j.dump()));
    return j.get<std::string>();
  }

  const Json& Array(const Json& j, const std::string& field) const {
    if (!j.is_array()) throw Bad(field, fmt::format("expected an array, got {}", j.type_name()));
    return j;
  }

  static std::string Field(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string Index(const std::string& path, size_t i) {
    return fmt::format("{}[{}]", path, i);
  }

 private:
  const std::string& source_;
};

bool IsLowerHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A relative path that stays inside the dataset directory.
bool IsSafeRelativePath(const std::string& file) {
  if (file.empty() || file.front() == '/') return false;
  for (const auto& part : Split(file, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

std::vector<ColumnSpec> ParseSchema(const FieldReader& r, const Json& j) {
  std::vector<ColumnSpec> schema;
  std::set<std::string> names;
  for (size_t i = 0; i < r.Array(j, "schema").size(); ++i) {
    const std::string path = FieldReader::Index("schema", i);
    r.CheckObject(j[i], path, {"name", "dtype"});
    ColumnSpec spec;
    spec.name = r.String(j[i]["name"], path + ".name");
    if (spec.name.empty()) throw r.Bad(path + ".name", "empty column name");
    if (!names.insert(spec.name).second) {
      throw r.Bad(path + ".name", fmt::format("column \"{}\" appears twice", spec.name));
    }
    const std::string dtype = r.String(j[i]["dtype"], path + ".dtype");
    try {
      spec.dtype = ParseDType(dtype);
    } catch (const Error& e) {
      throw r.Bad(path + ".dtype", e.what_text() + (e.hint().empty() ? "" : "; " + e.hint()));
    }
    schema.push_back(std::move(spec));
  }
  if (schema.empty()) throw r.Bad("schema", "a dataset needs at least one column");
  return schema;
}

const ColumnSpec* FindColumn(const std::vector<ColumnSpec>& schema, const std::string& name) {
  for (const auto& c : schema) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void CheckRoleColumns(const FieldReader& r, const Manifest& m) {
  std::vector<std::string> names;
  for (const auto& c : m.schema) names.push_back(c.name);
  const auto check = [&](const std::string& field, const std::string& name) -> const ColumnSpec* {
    if (name.empty()) return nullptr;
    const ColumnSpec* c = FindColumn(m.schema, name);
    if (c == nullptr) {
      throw r.Bad(field,
                  fmt::format("column \"{}\" is not in the schema ({})", name, Join(names, ", ")));
    }
    return c;
  };
  check("label_column", m.label_column);
  if (const ColumnSpec* g = check("group_column", m.group_column)) {
    if (g->dtype != DType::kInt64 && g->dtype != DType::kString) {
      throw r.Bad("group_column",
                  fmt::format("group column \"{}\" is {}; it must be int64 or string", g->name,
                              DTypeName(g->dtype)));
    }
  }
}

ShardEntry ParseShard(const FieldReader& r, const Json& j, const std::string& path, bool grouped) {
  r.CheckObject(j, path, {"file", "rows", "groups", "row_groups", "bytes", "raw_bytes", "sha256"});
  ShardEntry e;
  e.file = r.String(j["file"], path + ".file");
  if (!IsSafeRelativePath(e.file)) {
    throw r.Bad(path + ".file",
                fmt::format("\"{}\" is not a relative path inside the dataset directory", e.file));
  }
  e.rows = r.U64(j["rows"], path + ".rows");
  e.groups = r.U64(j["groups"], path + ".groups");
  e.row_groups = r.U64(j["row_groups"], path + ".row_groups");
  e.bytes = r.U64(j["bytes"], path + ".bytes");
  e.raw_bytes = r.U64(j["raw_bytes"], path + ".raw_bytes");
  e.sha256 = r.String(j["sha256"], path + ".sha256");
  if (!IsLowerHex64(e.sha256)) {
    throw r.Bad(path + ".sha256", fmt::format("\"{}\" is not 64 lowercase hex digits", e.sha256));
  }
  if (e.rows == 0) throw r.Bad(path + ".rows", "a shard holds at least one row");
  if (e.row_groups == 0 || e.row_groups > e.rows) {
    throw r.Bad(path + ".row_groups",
                fmt::format("{} row groups for {} rows (need 1..rows)", e.row_groups, e.rows));
  }
  if (grouped ? (e.groups == 0 || e.groups > e.rows) : e.groups != 0) {
    throw r.Bad(path + ".groups",
                grouped ? fmt::format("{} groups for {} rows (need 1..rows)", e.groups, e.rows)
                        : fmt::format("{} groups but the dataset has no group column", e.groups));
  }
  return e;
}

std::vector<ShardEntry> ParseShards(const FieldReader& r, const Json& j, bool grouped) {
  std::vector<ShardEntry> shards;
  std::set<std::string> files;
  for (size_t i = 0; i < r.Array(j, "shards").size(); ++i) {
    const std::string path = FieldReader::Index("shards", i);
    shards.push_back(ParseShard(r, j[i], path, grouped));
    if (!files.insert(shards.back().file).second) {
      throw r.Bad(path + ".file", fmt::format("\"{}\" is listed twice", shards.back().file));
    }
  }
  return shards;
}

ColumnStats ParseStats(const FieldReader& r, const Json& j, const std::string& path,
                       uint64_t rows) {
  // "infinite" is optional: manifests written before it counted none.
  Json fields = j;
  if (fields.is_object() && !fields.contains("infinite")) fields["infinite"] = 0;
  r.CheckObject(fields, path,
                {"count", "nulls", "infinite", "min", "max", "mean", "std", "quantiles"});
  ColumnStats s;
  s.count = r.U64(fields["count"], path + ".count");
  s.nulls = r.U64(fields["nulls"], path + ".nulls");
  s.infinite = r.U64(fields["infinite"], path + ".infinite");
  s.min = r.Double(j["min"], path + ".min");
  s.max = r.Double(j["max"], path + ".max");
  s.mean = r.Double(j["mean"], path + ".mean");
  s.std = r.Double(j["std"], path + ".std");
  if (s.count != rows) {
    throw r.Bad(path + ".count", fmt::format("{} rows, but the shards hold {}", s.count, rows));
  }
  if (s.nulls + s.infinite > s.count) {
    throw r.Bad(path + ".nulls", fmt::format("{} nulls and {} infinite values in {} rows", s.nulls,
                                             s.infinite, s.count));
  }
  if (s.min > s.max) throw r.Bad(path + ".min", fmt::format("min {} > max {}", s.min, s.max));
  if (s.std < 0) throw r.Bad(path + ".std", fmt::format("negative std {}", s.std));
  const Json& q = r.Array(j["quantiles"], path + ".quantiles");
  for (size_t i = 0; i < q.size(); ++i) {
    s.quantiles.push_back(r.Double(q[i], FieldReader::Index(path + ".quantiles", i)));
    if (i > 0 && !(s.quantiles[i - 1] <= s.quantiles[i])) {
      throw r.Bad(FieldReader::Index(path + ".quantiles", i), "quantile edges must not decrease");
    }
  }
  const size_t want = s.count == s.nulls + s.infinite ? 0 : kQuantileEdges;
  if (s.quantiles.size() != want) {
    throw r.Bad(path + ".quantiles",
                fmt::format("{} edges; expected {} for {} finite values", s.quantiles.size(), want,
                            s.count - s.nulls - s.infinite));
  }
  return s;
}

std::map<std::string, ColumnStats> ParseAllStats(const FieldReader& r, const Json& j,
                                                 const Manifest& m) {
  std::vector<std::string> names;
  for (const auto& c : m.schema) names.push_back(c.name);
  r.CheckObject(j, "stats", names);  // every column has stats, and nothing else does
  std::map<std::string, ColumnStats> stats;
  for (const auto& name : names) stats[name] = ParseStats(r, j[name], "stats." + name, m.rows());
  return stats;
}

GroupStats ParseGroupStats(const FieldReader& r, const Json& j, const Manifest& m) {
  r.CheckObject(j, "group_stats", {"groups", "min_length", "max_length", "mean_length"});
  GroupStats g;
  g.groups = r.U64(j["groups"], "group_stats.groups");
  g.min_length = r.U64(j["min_length"], "group_stats.min_length");
  g.max_length = r.U64(j["max_length"], "group_stats.max_length");
  g.mean_length = r.Double(j["mean_length"], "group_stats.mean_length");
  uint64_t shard_groups = 0;
  for (const auto& s : m.shards) shard_groups += s.groups;
  if (g.groups != shard_groups) {
    throw r.Bad("group_stats.groups",
                fmt::format("{} groups, but the shards hold {}", g.groups, shard_groups));
  }
  const bool lengths_ok = g.groups == 0
                              ? g.min_length == 0 && g.max_length == 0 && g.mean_length == 0
                              : g.min_length >= 1 && g.min_length <= g.max_length &&
                                    g.max_length <= m.rows() &&
                                    g.mean_length >= static_cast<double>(g.min_length) - 1e-9 &&
                                    g.mean_length <= static_cast<double>(g.max_length) + 1e-9;
  if (!lengths_ok) {
    throw r.Bad("group_stats",
                fmt::format("inconsistent group lengths: min {}, max {}, mean {} "
                            "over {} groups of {} rows",
                            g.min_length, g.max_length, g.mean_length, g.groups, m.rows()));
  }
  return g;
}

void CheckTotal(const FieldReader& r, const Json& j, const char* field, uint64_t sum) {
  const uint64_t total = r.U64(j[field], field);
  if (total != sum) {
    throw r.Bad(field, fmt::format("{}, but the shards add up to {}", total, sum));
  }
}

Json ParseText(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw DataError(fmt::format("not valid JSON: {}", e.what()),
                    ErrorWhere{.file = source, .byte_offset = static_cast<int64_t>(e.byte)},
                    kEditedHint);
  }
}

}  // namespace

Manifest Manifest::FromJson(const std::string& text, const std::string& source) {
  const FieldReader r(source);
  const Json j = ParseText(text, source);
  if (!j.is_object()) throw r.Bad("", "expected a JSON object");
  // Format and version first: a newer manifest may have fields this one lacks.
  if (!j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != manifest_json::kFormatName) {
    throw r.Bad("format", fmt::format("expected \"{}\": not a topspin dataset manifest",
                                      manifest_json::kFormatName));
  }
  if (!j.contains("version")) throw r.Bad("version", "missing required field");
  const uint64_t version = r.U64(j["version"], "version");
  if (version != kManifestVersion) {
    throw DataError(
        fmt::format("manifest version {} is not supported (this topspin reads version {})", version,
                    kManifestVersion),
        ErrorWhere{.file = source, .field = "version"},
        version > kManifestVersion ? "the dataset was written by a newer topspin: upgrade"
                                   : kEditedHint);
  }
  r.CheckObject(j, "",
                {"format", "version", "created_by", "rows", "bytes", "raw_bytes", "label_column",
                 "group_column", "schema", "group_stats", "shards", "stats"},
                {"tokenizer"});
  Manifest m;
  m.version = static_cast<uint32_t>(version);
  m.created_by = r.String(j["created_by"], "created_by");
  if (j.contains("tokenizer")) m.tokenizer = r.String(j["tokenizer"], "tokenizer");
  m.schema = ParseSchema(r, j["schema"]);
  m.label_column = r.String(j["label_column"], "label_column");
  m.group_column = r.String(j["group_column"], "group_column");
  CheckRoleColumns(r, m);
  m.shards = ParseShards(r, j["shards"], !m.group_column.empty());
  CheckTotal(r, j, "rows", m.rows());
  CheckTotal(r, j, "bytes", m.bytes());
  CheckTotal(r, j, "raw_bytes", m.raw_bytes());
  m.group_stats = ParseGroupStats(r, j["group_stats"], m);
  m.stats = ParseAllStats(r, j["stats"], m);
  return m;
}

}  // namespace topspin
