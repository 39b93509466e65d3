// Manifest: sums, JSON output and loading. Parsing and validation live in
// manifest_parse.cc.
#include "topspin/data/manifest.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/manifest_json.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

Json StatsJson(const ColumnStats& s) {
  Json quantiles = Json::array();
  for (double q : s.quantiles) quantiles.push_back(manifest_json::EncodeDouble(q));
  return Json{{"count", s.count},
              {"nulls", s.nulls},
              {"infinite", s.infinite},
              {"min", manifest_json::EncodeDouble(s.min)},
              {"max", manifest_json::EncodeDouble(s.max)},
              {"mean", manifest_json::EncodeDouble(s.mean)},
              {"std", manifest_json::EncodeDouble(s.std)},
              {"quantiles", std::move(quantiles)}};
}

Json ShardJson(const ShardEntry& e) {
  return Json{{"file", e.file},     {"rows", e.rows},
              {"groups", e.groups}, {"row_groups", e.row_groups},
              {"bytes", e.bytes},   {"raw_bytes", e.raw_bytes},
              {"sha256", e.sha256}};
}

}  // namespace

uint64_t Manifest::rows() const {
  uint64_t total = 0;
  for (const auto& s : shards) total += s.rows;
  return total;
}

uint64_t Manifest::bytes() const {
  uint64_t total = 0;
  for (const auto& s : shards) total += s.bytes;
  return total;
}

uint64_t Manifest::raw_bytes() const {
  uint64_t total = 0;
  for (const auto& s : shards) total += s.raw_bytes;
  return total;
}

uint64_t Manifest::row_groups() const {
  uint64_t total = 0;
  for (const auto& s : shards) total += s.row_groups;
  return total;
}

std::string DescribeSchemaDifference(const std::vector<ColumnSpec>& schema,
                                     const std::vector<ColumnSpec>& reference) {
  std::vector<std::string> parts;
  const auto find = [](const std::vector<ColumnSpec>& in, const std::string& name) {
    return std::find_if(in.begin(), in.end(), [&](const ColumnSpec& c) { return c.name == name; });
  };
  for (const ColumnSpec& want : reference) {
    const auto it = find(schema, want.name);
    if (it == schema.end()) {
      parts.push_back(fmt::format("column \"{}\" is missing", want.name));
    } else if (it->dtype != want.dtype) {
      parts.push_back(fmt::format("column \"{}\" is {} here and {} in the reference", want.name,
                                  DTypeName(it->dtype), DTypeName(want.dtype)));
    }
  }
  for (const ColumnSpec& have : schema) {
    if (find(reference, have.name) == reference.end()) {
      parts.push_back(fmt::format("column \"{}\" is extra", have.name));
    }
  }
  if (parts.empty() && schema != reference) parts.push_back("the columns are in another order");
  return Join(parts, "; ");
}

std::string Manifest::ToJson() const {
  Json j;
  j["format"] = manifest_json::kFormatName;
  j["version"] = version;
  j["created_by"] = created_by;
  if (!tokenizer.empty()) j["tokenizer"] = tokenizer;
  j["rows"] = rows();
  j["bytes"] = bytes();
  j["raw_bytes"] = raw_bytes();
  j["label_column"] = label_column;
  j["group_column"] = group_column;
  j["schema"] = Json::array();
  for (const auto& c : schema)
    j["schema"].push_back({{"name", c.name}, {"dtype", DTypeName(c.dtype)}});
  j["group_stats"] = {{"groups", group_stats.groups},
                      {"min_length", group_stats.min_length},
                      {"max_length", group_stats.max_length},
                      {"mean_length", manifest_json::EncodeDouble(group_stats.mean_length)}};
  j["shards"] = Json::array();
  for (const auto& s : shards) j["shards"].push_back(ShardJson(s));
  // Schema order reads best; stats of columns outside the schema (which
  // FromJson rejects) still appear, after them, so nothing is dropped.
  Json stats_json = Json::object();
  for (const auto& c : schema) {
    if (auto it = stats.find(c.name); it != stats.end()) stats_json[c.name] = StatsJson(it->second);
  }
  for (const auto& [name, s] : stats) {
    if (!stats_json.contains(name)) stats_json[name] = StatsJson(s);
  }
  j["stats"] = std::move(stats_json);
  return j.dump(2) + "\n";
}

Manifest Manifest::Load(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestFile;
  if (!std::filesystem::is_directory(dir)) {
    const bool interrupted = std::filesystem::exists(dir.string() + ".incomplete");
    throw IoError("dataset directory not found", ErrorWhere{.file = dir.string()},
                  interrupted ? "only " + dir.string() +
                                    ".incomplete exists: the conversion was interrupted before it "
                                    "finished; re-run topspin convert"
                              : "check the path, or create the dataset with topspin convert");
  }
  if (!std::filesystem::exists(path)) {
    throw IoError("no manifest.json: not a dataset directory", ErrorWhere{.file = path.string()},
                  "a dataset directory is written by topspin convert");
  }
  return FromJson(ReadFile(path), path.string());
}

}  // namespace topspin
