// topspin dataset merge PART_DIR... --out DIR: the parts of a convert
// (`topspin convert ... --part K/N`) -> one dataset (topspin/data/merge.h).
// topspin dataset diff A B [--by-group]: do two datasets hold the same data
// (topspin/data/dataset_diff.h)? Exit 0 when they do, 1 when not (like
// diff and `inspect --verify`), 2 on a user error.
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_request.h"
#include "topspin/build_info.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/data/dataset_diff.h"
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

struct DiffArgs {
  std::string a, b;
  bool by_group = false;
  size_t max = 10;
};

void RunDiff(const DiffArgs& args) {
  const DatasetDiff d =
      DiffDatasets(args.a, args.b, {.by_group = args.by_group, .max_differences = args.max});
  const std::string compared =
      args.by_group ? fmt::format("{} rows in {} groups, matched by key", d.rows, d.groups)
                    : fmt::format("{} rows, row by row", d.rows);
  if (d.equal()) {
    fmt::print("{} and {} hold the same data ({})\n", args.a, args.b, compared);
    return;
  }
  fmt::print("{} and {} differ:\n", args.a, args.b);
  for (const std::string& line : d.differences) fmt::print("  {}\n", line);
  if (d.truncated) fmt::print("  ... and more (--max raises the limit)\n");
  throw ExitRequest(1);
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

  static DiffArgs diff_args;
  auto* diff = dataset->add_subcommand(
      "diff",
      "Check that two datasets hold the same data: rows, row groups and statistics (exit 0), or "
      "list where they differ (exit 1)");
  diff->add_option("A", diff_args.a, "a dataset directory")->required()->check(CLI::ExistingDirectory);
  diff->add_option("B", diff_args.b, "the dataset to compare it with")
      ->required()
      ->check(CLI::ExistingDirectory);
  diff->add_flag("--by-group", diff_args.by_group,
                 "match groups by key: the same groups with the same rows in the same order, "
                 "wherever they sit (data that went through a shuffle, e.g. Spark)");
  diff->add_option("--max", diff_args.max, "differences to list")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  diff->callback([] { RunDiff(diff_args); });
}

}  // namespace topspin::cli
