// topspin inspect DIR [--verify] [--json]: what a dataset holds (rows,
// groups, shards, bytes, per-column statistics) and, with --verify, whether
// every byte is intact. Exit status: 0 ok; 1 when --verify finds damage
// (through ExitRequest, see cli/exit_request.h); 2 when DIR cannot be read
// as a dataset at all (a missing directory or an invalid manifest.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/exit_request.h"
#include "data/shard_layout.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/dataset.h"

namespace topspin::cli {
namespace {

using Json = nlohmann::ordered_json;

// The status of `inspect --verify` on a damaged dataset (as `sha256sum -c`).
constexpr int kExitDamaged = 1;

struct InspectArgs {
  std::string dir;
  bool verify = false;
  bool json = false;
};

// The quantiles shown next to each column: edge i of kQuantileEdges is q(i / 64).
struct ShownQuantile {
  const char* name;
  int edge;
};
constexpr ShownQuantile kShownQuantiles[] = {{"p25", 16}, {"p50", 32}, {"p75", 48}};

uint64_t RowGroups(const Manifest& m) {
  uint64_t total = 0;
  for (const auto& s : m.shards) total += s.row_groups;
  return total;
}

double CompressionRatio(const Manifest& m) {
  return m.bytes() == 0 ? 0.0 : static_cast<double>(m.raw_bytes()) / m.bytes();
}

// Column chunks by codec over every shard's footer: what the writer chose
// (docs/FORMAT.md, "Chunks").
std::map<std::string, uint64_t> ChunksByCodec(const DatasetReader& reader) {
  std::map<std::string, uint64_t> counts;
  for (const Codec codec : {Codec::kNone, Codec::kZstd, Codec::kZstdSplit}) {
    counts[shard_layout::CodecName(codec)] = 0;
  }
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    for (size_t g = 0; g < shard.num_row_groups(); ++g) {
      for (const ChunkInfo& c : shard.row_group(g).chunks)
        ++counts[shard_layout::CodecName(c.codec)];
    }
  }
  return counts;
}

// JSON cannot hold inf or NaN: those become strings, as in manifest.json.
Json Number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string Short(double v) {
  return fmt::format("{:.6g}", v);
}

// Runs Verify(); the error message when the dataset is damaged.
std::optional<std::string> VerifyDataset(const DatasetReader& reader) {
  try {
    reader.Verify();
    return std::nullopt;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kData && e.kind() != ErrorKind::kIo) throw;
    return e.Message();
  }
}

Json ColumnJson(const ColumnSpec& spec, const ColumnStats& s) {
  Json quantiles = Json::object();
  for (const auto& q : kShownQuantiles) {
    quantiles[q.name] = s.quantiles.empty() ? Json(nullptr) : Number(s.quantiles[q.edge]);
  }
  return Json{{"name", spec.name},
              {"dtype", DTypeName(spec.dtype)},
              {"of_lengths", IsVariableLength(spec.dtype)},
              {"count", s.count},
              {"nulls", s.nulls},
              {"infinite", s.infinite},
              {"min", Number(s.min)},
              {"max", Number(s.max)},
              {"mean", Number(s.mean)},
              {"std", Number(s.std)},
              {"quantiles", std::move(quantiles)}};
}

Json SummaryJson(const DatasetReader& reader) {
  const Manifest& m = reader.manifest();
  Json j{{"dir", reader.dir().string()},
         {"created_by", m.created_by},
         {"rows", m.rows()},
         {"label_column", m.label_column},
         {"group_column", m.group_column},
         {"groups",
          {{"groups", m.group_stats.groups},
           {"min_length", m.group_stats.min_length},
           {"max_length", m.group_stats.max_length},
           {"mean_length", m.group_stats.mean_length}}},
         {"shards", m.shards.size()},
         {"row_groups", RowGroups(m)},
         {"bytes", m.bytes()},
         {"raw_bytes", m.raw_bytes()},
         {"compression_ratio", CompressionRatio(m)},
         {"chunks_by_codec", ChunksByCodec(reader)}};
  j["columns"] = Json::array();
  for (const auto& spec : m.schema) j["columns"].push_back(ColumnJson(spec, m.stats.at(spec.name)));
  return j;
}

void PrintSummary(const DatasetReader& reader) {
  const Manifest& m = reader.manifest();
  fmt::print("dataset      {}\n", reader.dir().string());
  fmt::print("created by   {}\n", m.created_by);
  fmt::print("rows         {}\n", m.rows());
  if (!m.group_column.empty()) {
    const GroupStats& g = m.group_stats;
    fmt::print("groups       {} by \"{}\"; list length min {}, max {}, mean {:.2f}\n", g.groups,
               m.group_column, g.min_length, g.max_length, g.mean_length);
  }
  if (!m.label_column.empty()) fmt::print("label        {}\n", m.label_column);
  fmt::print("shards       {} ({} row groups)\n", m.shards.size(), RowGroups(m));
  fmt::print("bytes        {} on disk, {} raw, compression {:.2f}x\n", FormatBytes(m.bytes()),
             FormatBytes(m.raw_bytes()), CompressionRatio(m));
  // Largest first: which codecs the writer chose for the column chunks.
  const auto counts = ChunksByCodec(reader);
  std::vector<std::pair<std::string, uint64_t>> codecs(counts.begin(), counts.end());
  std::stable_sort(codecs.begin(), codecs.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string line;
  uint64_t total = 0;
  for (const auto& [name, n] : codecs) {
    total += n;
    if (n > 0) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", n, name);
  }
  fmt::print("chunks       {} column chunks{}{}\n", total, line.empty() ? "" : ": ", line);
}

void PrintColumns(const Manifest& m) {
  fmt::print("\n{:<20} {:<10} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "column",
             "dtype", "nulls", "min", "max", "mean", "std", "p25", "p50", "p75");
  bool lengths = false;
  for (const auto& spec : m.schema) {
    const ColumnStats& s = m.stats.at(spec.name);
    const bool of_lengths = IsVariableLength(spec.dtype);
    lengths |= of_lengths;
    std::string line =
        fmt::format("{:<20} {:<10} {:>10}", spec.name,
                    std::string(DTypeName(spec.dtype)) + (of_lengths ? "*" : ""), s.nulls);
    if (s.quantiles.empty()) {
      line += fmt::format(" {:>12}", "(no values)");
    } else {
      for (double v : {s.min, s.max, s.mean, s.std}) line += fmt::format(" {:>12}", Short(v));
      for (const auto& q : kShownQuantiles)
        line += fmt::format(" {:>12}", Short(s.quantiles[q.edge]));
    }
    fmt::print("{}\n", line);
  }
  if (lengths) fmt::print("* statistics of row lengths (bytes or tokens)\n");
}

// Reports damage found by --verify and ends the command with kExitDamaged.
[[noreturn]] void FailVerify(const std::string& message, Json* summary) {
  if (summary != nullptr) {
    (*summary)["verified"] = false;
    (*summary)["verify_error"] = message;
    fmt::print("{}\n", summary->dump(2));
  }
  std::fflush(stdout);
  std::fprintf(stderr, "topspin: verify failed: %s\n", message.c_str());
  throw ExitRequest(kExitDamaged);
}

void RunInspect(const InspectArgs& args) {
  std::optional<DatasetReader> reader;
  try {
    reader.emplace(args.dir);
  } catch (const Error& e) {
    // A missing directory is a usage error (exit 2); with --verify, a
    // damaged manifest.json is the damage the user asked about (exit 1).
    if (!args.verify || e.kind() != ErrorKind::kData) throw;
    Json summary{{"dir", args.dir}};
    FailVerify(e.Message(), args.json ? &summary : nullptr);
  }
  const std::optional<std::string> damage = args.verify ? VerifyDataset(*reader) : std::nullopt;
  if (args.json) {
    Json summary = SummaryJson(*reader);
    if (damage) FailVerify(*damage, &summary);
    if (args.verify) summary["verified"] = true;
    fmt::print("{}\n", summary.dump(2));
    return;
  }
  PrintSummary(*reader);
  if (args.verify && !damage) {
    fmt::print("verify       ok: {} shards, SHA-256 and every chunk checksum match\n",
               reader->num_shards());
  }
  PrintColumns(reader->manifest());
  if (damage) FailVerify(*damage, nullptr);
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  static InspectArgs args;
  auto* inspect = app.add_subcommand(
      "inspect", "Show a dataset's rows, groups, shards and column statistics; --verify checksums");
  inspect->add_option("DIR", args.dir, "dataset directory (written by topspin convert)")
      ->required();
  inspect->add_flag("--verify", args.verify,
                    "check every shard's SHA-256 and every chunk checksum; exit 1 on damage");
  inspect->add_flag("--json", args.json, "print the summary as JSON");
  inspect->callback([] { RunInspect(args); });
}

}  // namespace topspin::cli
