// topspin dataset merge PART_DIR... --out DIR: the parts of a convert
// (`topspin convert ... --part K/N`) -> one dataset (topspin/data/merge.h).
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/build_info.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/data/merge.h"

namespace topspin::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> parts;
  std::string out;
};

void RunMerge(const MergeArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  MergeOptions options;
  options.parts.assign(args.parts.begin(), args.parts.end());
  options.out = args.out;
  options.created_by = fmt::format("topspin {} dataset merge {}", build::kVersion,
                                   Join(args.parts, " "));
  const Manifest m = MergeParts(options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("merged {} part{} into {}: {} rows", args.parts.size(),
             args.parts.size() == 1 ? "" : "s", args.out, m.rows());
  if (!m.group_column.empty()) fmt::print(", {} groups", m.group_stats.groups);
  fmt::print(", {} shard{}, {} in {:.1f} s\n", m.shards.size(), m.shards.size() == 1 ? "" : "s",
             FormatBytes(m.bytes()), seconds);
}

}  // namespace

void RegisterDataset(CLI::App& app) {
  auto* dataset = app.add_subcommand("dataset", "Work with dataset directories");
  dataset->require_subcommand(1);
  static MergeArgs args;
  auto* merge = dataset->add_subcommand(
      "merge",
      "Join the parts of a convert (topspin convert ... --part K/N, one per K) into one dataset "
      "with the rows, groups and statistics of a single convert");
  merge->add_option("PART_DIR", args.parts, "the part directories (all N, any order)")
      ->required()
      ->check(CLI::ExistingDirectory);
  merge->add_option("--out", args.out, "the dataset directory to create (must not exist)")
      ->required();
  merge->callback([] { RunMerge(args); });
}

}  // namespace topspin::cli
