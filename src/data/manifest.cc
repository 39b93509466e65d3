// Manifest: sums, JSON output and loading. Parsing and validation live in
// manifest_parse.cc.
#include "topspin/data/manifest.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "data/manifest_json.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

Json StatsJson(const ColumnStats& s) {
  Json quantiles = Json::array();
  for (double q : s.quantiles) quantiles.push_back(manifest_json::EncodeDouble(q));
  return Json{{"count", s.count},
              {"nulls", s.nulls},
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

std::string Manifest::ToJson() const {
  Json j;
  j["format"] = manifest_json::kFormatName;
  j["version"] = version;
  j["created_by"] = created_by;
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
