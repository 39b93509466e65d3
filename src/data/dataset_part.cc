// Convert parts and their merge (dataset_part.h, topspin/data/merge.h).
#include "data/dataset_part.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "data/byte_io.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/hash.h"
#include "topspin/core/sha256.h"
#include "topspin/data/merge.h"
#include "topspin/data/shard.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kGroupsMagic[8] = {'T', 'S', 'G', 'R', 'O', 'U', 'P', '1'};
constexpr char kStatsMagic[8] = {'T', 'S', 'P', 'S', 'T', 'A', 'T', '1'};

std::string EncodeGroups(const std::vector<PartGroup>& groups) {
  std::string out(kGroupsMagic, sizeof(kGroupsMagic));
  PutBytes<uint64_t>(out, groups.size());
  for (const PartGroup& g : groups) {
    PutBytes<uint32_t>(out, g.input);
    PutBytes<uint8_t>(out, static_cast<uint8_t>(g.key.index()));
    if (const auto* i = std::get_if<int64_t>(&g.key)) PutBytes(out, *i);
    if (const auto* s = std::get_if<std::string>(&g.key)) {
      PutBytes<uint64_t>(out, s->size());
      out += *s;
    }
  }
  return out;
}

std::vector<PartGroup> DecodeGroups(ByteCursor in) {
  in.Magic(kGroupsMagic, "is wrong");
  const auto count = in.Get<uint64_t>("group count");
  std::vector<PartGroup> groups;
  for (uint64_t g = 0; g < count; ++g) {
    PartGroup group;
    group.input = in.Get<uint32_t>("group input");
    const auto kind = in.Get<uint8_t>("group kind");
    if (kind == 1) {
      group.key = in.Get<int64_t>("group key");
    } else if (kind == 2) {
      const auto size = in.Get<uint64_t>("group key size");
      group.key = std::string(in.Take(size, "group key"));
    } else if (kind != 0) {
      in.Fail("group kind", "is not 0, 1 or 2");
    }
    groups.push_back(std::move(group));
  }
  if (in.left() != 0) in.Fail("groups", "have trailing bytes");
  return groups;
}

std::string EncodeStats(const std::vector<ColumnStatsBuilder>& stats) {
  std::string out(kStatsMagic, sizeof(kStatsMagic));
  PutBytes<uint64_t>(out, stats.size());
  for (const auto& builder : stats) {
    const std::string state = builder.Serialize();
    PutBytes<uint64_t>(out, state.size());
    out += state;
  }
  return out;
}

std::vector<ColumnStatsBuilder> DecodeStats(ByteCursor in, const std::string& source) {
  in.Magic(kStatsMagic, "is wrong");
  const auto count = in.Get<uint64_t>("column count");
  std::vector<ColumnStatsBuilder> stats;
  for (uint64_t c = 0; c < count; ++c) {
    const auto size = in.Get<uint64_t>("state size");
    stats.push_back(ColumnStatsBuilder::Deserialize(in.Take(size, "state"), source));
  }
  if (in.left() != 0) in.Fail("statistics", "have trailing bytes");
  return stats;
}

// One part as read back.
struct Part {
  std::filesystem::path dir;
  Manifest manifest;
  uint32_t part = 0, parts = 0;
  uint64_t first_input = 0, total_inputs = 0;
  std::string fingerprint;
  std::vector<std::string> inputs;
  std::vector<ColumnStatsBuilder> stats;
  std::vector<PartGroup> groups;

  std::string Input(uint32_t i) const {
    return i < inputs.size() ? inputs[i] : fmt::format("input {} of part {}", i, part);
  }
};

// The bytes of `dir`/`name`, checked against the SHA-256 part.json records.
std::string ReadChecked(const std::filesystem::path& dir, const char* name, const Json& json,
                  const char* key) {
  const std::filesystem::path path = dir / name;
  if (!std::filesystem::exists(path)) {
    throw DataError(fmt::format("the part has no {}", name), ErrorWhere{.file = path.string()},
                    "the part is incomplete: convert it again with the same --part K/N");
  }
  std::string text = ReadFile(path);
  const std::string want = json.value(key, "");
  if (Sha256Hex(text) != want) {
    throw DataError(fmt::format("{} does not match the SHA-256 in {}", name, kPartFile),
                    ErrorWhere{.file = path.string()}, "the part is damaged: convert it again");
  }
  return text;
}

Part LoadPart(const std::filesystem::path& dir) {
  Part p;
  p.dir = dir;
  const std::filesystem::path info = dir / kPartFile;
  if (!std::filesystem::exists(info)) {
    throw DataError(
        fmt::format("{} is not a convert part (it has no {})", dir.string(), kPartFile),
        ErrorWhere{.file = info.string()},
        "make parts with topspin convert ... --part K/N --out DIR (one per K in 0..N-1)");
  }
  p.manifest = Manifest::Load(dir);
  Json json;
  try {
    json = Json::parse(ReadFile(info));
    p.part = json.at("part").get<uint32_t>();
    p.parts = json.at("parts").get<uint32_t>();
    p.first_input = json.at("first_input").get<uint64_t>();
    p.total_inputs = json.at("total_inputs").get<uint64_t>();
    p.fingerprint = json.at("fingerprint").get<std::string>();
    for (const auto& input : json.at("inputs")) p.inputs.push_back(input.at("file"));
  } catch (const Json::exception& e) {
    throw DataError(fmt::format("{} is not a valid part description: {}", kPartFile, e.what()),
                    ErrorWhere{.file = info.string()}, "convert the part again");
  }
  const std::string stats = ReadChecked(dir, kPartStatsFile, json, "stats_sha256");
  const std::string groups = ReadChecked(dir, kPartGroupsFile, json, "groups_sha256");
  p.stats = DecodeStats(ByteCursor(stats, (dir / kPartStatsFile).string()),
                        (dir / kPartStatsFile).string());
  p.groups = DecodeGroups(ByteCursor(groups, (dir / kPartGroupsFile).string()));
  if (p.stats.size() != p.manifest.schema.size()) {
    throw DataError(fmt::format("{} holds {} columns' statistics; the manifest has {} columns",
                                kPartStatsFile, p.stats.size(), p.manifest.schema.size()),
                    ErrorWhere{.file = (dir / kPartStatsFile).string()}, "convert the part again");
  }
  return p;
}

// Every part of one convert, once each, in part order; else Error kData.
void CheckPartSet(std::vector<Part>& parts) {
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.part < b.part; });
  const Part& first = parts.front();
  for (const Part& p : parts) {
    const ErrorWhere where{.file = (p.dir / kPartFile).string()};
    if (p.parts != first.parts || p.fingerprint != first.fingerprint) {
      throw DataError(fmt::format("{} is part {}/{} of input list {}, {} is part {}/{} of {}: "
                                  "they are not parts of one convert",
                                  p.dir.string(), p.part, p.parts, p.fingerprint,
                                  first.dir.string(), first.part, first.parts, first.fingerprint),
                      where, "merge the parts of one convert: same inputs, same N");
    }
    const std::string diff = DescribeSchemaDifference(p.manifest.schema, first.manifest.schema);
    if (!diff.empty() || p.manifest.label_column != first.manifest.label_column ||
        p.manifest.group_column != first.manifest.group_column ||
        p.manifest.tokenizer != first.manifest.tokenizer) {
      throw DataError(fmt::format("part {} ({}) differs from part {} ({}): {}", p.part,
                                  p.dir.string(), first.part, first.dir.string(),
                                  diff.empty() ? "label, group column or tokenizer" : diff),
                      where, "convert every part with the same options");
    }
  }
  std::vector<std::string> missing;
  std::set<uint32_t> have;
  for (const Part& p : parts) {
    if (!have.insert(p.part).second) {
      throw DataError(fmt::format("part {}/{} is given twice", p.part, p.parts),
                      ErrorWhere{.file = p.dir.string()}, "pass each part directory once");
    }
  }
  for (uint32_t k = 0; k < first.parts; ++k) {
    if (!have.contains(k)) missing.push_back(fmt::format("{}/{}", k, first.parts));
  }
  if (!missing.empty()) {
    throw DataError(fmt::format("parts {} are missing ({} of {} given)", fmt::join(missing, ", "),
                                parts.size(), first.parts),
                    ErrorWhere{.file = first.dir.string()},
                    "convert the missing parts (topspin convert ... --part K/N), then merge all");
  }
}

size_t KeyHash(const GroupKey& key) {
  return std::hash<GroupKey>()(key);
}

// A group whose rows are in two parts would be split in the merged dataset.
void CheckGroupsDisjoint(const std::vector<Part>& parts, const std::string& column) {
  struct Ref {
    size_t hash;
    uint32_t part;
    uint32_t group;
  };
  std::vector<Ref> refs;
  for (uint32_t p = 0; p < parts.size(); ++p) {
    for (uint32_t g = 0; g < parts[p].groups.size(); ++g)
      refs.push_back(Ref{KeyHash(parts[p].groups[g].key), p, g});
  }
  std::sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
    return std::tie(a.hash, a.part, a.group) < std::tie(b.hash, b.part, b.group);
  });
  for (size_t i = 0; i + 1 < refs.size(); ++i) {
    for (size_t j = i + 1; j < refs.size() && refs[j].hash == refs[i].hash; ++j) {
      const PartGroup& a = parts[refs[i].part].groups[refs[i].group];
      const PartGroup& b = parts[refs[j].part].groups[refs[j].group];
      if (refs[i].part == refs[j].part || a.key != b.key) continue;
      const std::string key = std::holds_alternative<int64_t>(a.key)
                                  ? std::to_string(std::get<int64_t>(a.key))
                              : std::holds_alternative<std::string>(a.key)
                                  ? "\"" + std::get<std::string>(a.key) + "\""
                                  : "null";
      throw DataError(
          fmt::format("group {} of column \"{}\" has rows in two input files, {} (part {}) and {} "
                      "(part {}); the rows of a group must be in one file",
                      key, column, parts[refs[i].part].Input(a.input), parts[refs[i].part].part,
                      parts[refs[j].part].Input(b.input), parts[refs[j].part].part),
          ErrorWhere{.file = parts[refs[j].part].Input(b.input), .field = column},
          fmt::format("write the data partitioned by the group key (Spark: df.repartition(N, "
                      "\"{0}\").sortWithinPartitions(\"{0}\"), as scripts/spark/convert.py does)",
                      column));
    }
  }
}

// A hard link when `to` is on the same filesystem, else a copy.
void LinkOrCopy(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::create_hard_link(from, to, ec);
  if (!ec) return;
  std::filesystem::copy_file(from, to, ec);
  if (ec) {
    throw IoError(fmt::format("cannot copy the shard to {}: {}", to.string(), ec.message()),
                  ErrorWhere{.file = from.string()}, "check free space and permissions");
  }
}

}  // namespace

void WritePartFiles(const std::filesystem::path& dir, const InputShare& share,
                    const std::vector<uint64_t>& rows_per_input,
                    const std::vector<ColumnStatsBuilder>& stats,
                    const std::vector<PartGroup>& groups) {
  const std::string stats_bytes = EncodeStats(stats);
  const std::string groups_bytes = EncodeGroups(groups);
  WriteFileAtomic(dir / kPartStatsFile, stats_bytes);
  WriteFileAtomic(dir / kPartGroupsFile, groups_bytes);
  Json json;
  json["part"] = share.part;
  json["parts"] = share.parts;
  json["first_input"] = share.first_input;
  json["total_inputs"] = share.total_inputs;
  json["fingerprint"] = share.fingerprint;
  Json inputs = Json::array();
  for (size_t i = 0; i < share.inputs.size(); ++i) {
    inputs.push_back({{"file", share.inputs[i].string()},
                      {"rows", i < rows_per_input.size() ? rows_per_input[i] : 0}});
  }
  json["inputs"] = std::move(inputs);
  json["stats_sha256"] = Sha256Hex(stats_bytes);
  json["groups_sha256"] = Sha256Hex(groups_bytes);
  WriteFileAtomic(dir / kPartFile, json.dump(2) + "\n");
}

Manifest MergeParts(const MergeOptions& options) {
  if (options.parts.empty()) {
    throw Error(ErrorKind::kUsage, "no parts to merge", ErrorWhere{},
                "topspin dataset merge PART_DIR... --out DIR");
  }
  std::vector<Part> parts;
  for (const auto& dir : options.parts) parts.push_back(LoadPart(dir));
  CheckPartSet(parts);
  const Manifest& first = parts.front().manifest;
  if (!first.group_column.empty()) CheckGroupsDisjoint(parts, first.group_column);

  Manifest merged;
  merged.schema = first.schema;
  merged.label_column = first.label_column;
  merged.group_column = first.group_column;
  merged.tokenizer = first.tokenizer;
  merged.created_by = options.created_by.empty()
                          ? fmt::format("topspin {} dataset merge", build::kVersion)
                          : options.created_by;
  AtomicDirectory out(options.out);
  std::vector<ColumnStatsBuilder> stats = parts.front().stats;
  uint64_t rows = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Manifest& m = parts[p].manifest;
    for (ShardEntry shard : m.shards) {
      const std::filesystem::path from = parts[p].dir / shard.file;
      shard.file = fmt::format("shard-{:05d}{}", merged.shards.size(), kShardExtension);
      LinkOrCopy(from, out.path() / shard.file);
      merged.shards.push_back(std::move(shard));
    }
    if (p > 0) {
      for (size_t c = 0; c < stats.size(); ++c) stats[c].Merge(parts[p].stats[c]);
    }
    GroupStats& g = merged.group_stats;
    const GroupStats& pg = m.group_stats;
    if (pg.groups > 0) {
      g.min_length = g.groups == 0 ? pg.min_length : std::min(g.min_length, pg.min_length);
      g.max_length = std::max(g.max_length, pg.max_length);
      g.groups += pg.groups;
      rows += m.rows();  // every row is in a group (null is a group of its own)
    }
  }
  if (merged.group_stats.groups > 0) {
    merged.group_stats.mean_length =
        static_cast<double>(rows) / static_cast<double>(merged.group_stats.groups);
  }
  for (size_t c = 0; c < stats.size(); ++c) merged.stats[merged.schema[c].name] = stats[c].Finish();
  const std::string text = merged.ToJson();
  Manifest::FromJson(text, (options.out / kManifestFile).string());  // the reader's checks
  WriteFileAtomic(out.path() / kManifestFile, text);
  out.Commit();
  return merged;
}

}  // namespace topspin
