// topspin gen shop|text: synthetic data for the demos.
//
//   gen shop --queries N --out PATH [--format csv|letor|shards]
//     csv     PATH/shop.csv (or PATH itself when it ends in .csv)
//     letor   PATH/shop.txt (or PATH itself when it ends in .txt), plus
//             shop.features.txt beside it: "INDEX NAME" per feature
//     shards  PATH is the dataset directory (must not exist)
//   gen text --out FILE: a corpus from /usr/share/common-licenses (see
//     topspin/data/gen_text.h)
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/progress.h"
#include "topspin/data/gen_shop.h"
#include "topspin/data/gen_text.h"

namespace topspin::cli {
namespace {

struct ShopArgs {
  ShopOptions options;
  std::string out;
  std::string format = "csv";
  bool no_byte_planes = false;
};

struct TextArgs {
  std::string out;
  uint64_t bytes = 0;
  bool copyrights = false;
  std::vector<std::string> sources;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The file a text format writes: PATH itself when it already names such a
// file, else PATH/shop<ext>.
fs::path ShopFile(const std::string& out, const std::string& ext) {
  const fs::path path(out);
  return path.extension() == ext ? path : path / ("shop" + ext);
}

std::string FeatureMap() {
  std::string text;
  const auto names = ShopFeatureNames();
  for (size_t i = 0; i < names.size(); ++i) text += fmt::format("{} {}\n", i + 1, names[i]);
  return text;
}

void RunShop(const ShopArgs& args) {
  ValidateShopOptions(args.options);
  std::unique_ptr<Progress> progress;  // from the first block: no line when setup fails
  const auto update = [&](uint64_t done) {
    if (!progress) {
      progress = std::make_unique<Progress>("gen shop", args.options.queries,
                                            ProgressOptions{.unit = "queries"});
    }
    progress->Update(done);
  };
  const auto start = std::chrono::steady_clock::now();
  if (args.format == "shards") {
    DatasetWriterOptions writer;
    writer.threads = args.options.threads;
    writer.byte_planes = !args.no_byte_planes;
    writer.created_by = fmt::format(
        "topspin {} gen shop --queries {} --seed {} --min-list {} --max-list {}", build::kVersion,
        args.options.queries, args.options.seed, args.options.min_list, args.options.max_list);
    const Manifest m = WriteShopShards(args.out, args.options, writer, update);
    if (progress) progress->Complete();
    fmt::print("wrote {}: {} queries, {} rows, {} shard{}, {} in {:.1f} s\n", args.out,
               m.group_stats.groups, m.rows(), m.shards.size(), m.shards.size() == 1 ? "" : "s",
               FormatBytes(m.bytes()), SecondsSince(start));
    return;
  }
  const bool csv = args.format == "csv";
  const fs::path file = ShopFile(args.out, csv ? ".csv" : ".txt");
  const ShopWriteSummary s =
      csv ? WriteShopCsv(file, args.options, update) : WriteShopLetor(file, args.options, update);
  if (progress) progress->Complete();
  fmt::print("wrote {}: {} queries, {} rows, {} in {:.1f} s\n", file.string(), s.queries, s.rows,
             FormatBytes(s.bytes), SecondsSince(start));
  if (csv) {
    fmt::print("next: topspin convert {} --label label --group qid --out DATASET_DIR\n",
               file.string());
  } else {
    const fs::path features = file.parent_path() / "shop.features.txt";
    WriteFileAtomic(features, FeatureMap());
    fmt::print("feature indices: {}\n", features.string());
  }
}

void RunText(const TextArgs& args) {
  TextCorpusOptions options;
  if (!args.sources.empty()) options.roots.assign(args.sources.begin(), args.sources.end());
  options.include_copyrights = args.copyrights;
  options.max_bytes = args.bytes;
  const auto start = std::chrono::steady_clock::now();
  const TextCorpusSummary s = WriteTextCorpus(args.out, options);
  fmt::print("wrote {}: {} from {} file{}{}", args.out, FormatBytes(s.bytes), s.files,
             s.files == 1 ? "" : "s", s.truncated ? " (capped by --bytes)" : "");
  if (s.skipped_files > 0) fmt::print(", {} non-UTF-8 file(s) skipped", s.skipped_files);
  fmt::print(" in {:.1f} s\n", SecondsSince(start));
}

void AddShop(CLI::App* gen, ShopArgs& args) {
  auto* cmd = gen->add_subcommand(
      "shop", "Synthetic product-search logs for learning to rank (graded labels 0-4, qid groups)");
  cmd->add_option("--queries", args.options.queries, "number of queries (lists)")
      ->required()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  cmd->add_option("--seed", args.options.seed, "random seed; same seed, same bytes")
      ->capture_default_str();
  cmd->add_option("--out", args.out,
                  "csv: DIR (writes DIR/shop.csv) or a .csv path; letor: DIR (DIR/shop.txt) or a "
                  ".txt path; shards: the dataset directory to create")
      ->required();
  cmd->add_option("--format", args.format,
                  "csv (header row; nulls empty) | letor (SVMlight text) | shards (a dataset)")
      ->check(CLI::IsMember({"csv", "letor", "shards"}))
      ->capture_default_str();
  cmd->add_flag("--no-byte-planes", args.no_byte_planes,
                "shards: numbers as plain zstd only (as topspin convert --no-byte-planes)");
  cmd->add_option("--min-list", args.options.min_list, "fewest products per query")
      ->check(CLI::Range(1, kShopMaxList))
      ->capture_default_str();
  cmd->add_option("--max-list", args.options.max_list, "most products per query")
      ->check(CLI::Range(1, kShopMaxList))
      ->capture_default_str();
  cmd->add_option("--threads", args.options.threads,
                  "generation threads (0: one per core); the output does not depend on it")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->callback([&args] { RunShop(args); });
}

void AddText(CLI::App* gen, TextArgs& args) {
  auto* cmd = gen->add_subcommand(
      "text",
      "A small text corpus for the GPT demo: the license texts in /usr/share/common-licenses "
      "(every Debian/Ubuntu machine has them; ~240 KB), in name order, links and non-UTF-8 "
      "files skipped");
  cmd->add_option("--out", args.out, "the text file to write")->required();
  cmd->add_option("--bytes", args.bytes,
                  "cap the corpus at N bytes, ending at a line break (0: all)")
      ->capture_default_str();
  cmd->add_flag("--with-copyrights", args.copyrights,
                "also /usr/share/doc/*/copyright by package name (tens of MB; varies by machine)");
  cmd->add_option("--source", args.sources,
                  "directories whose files to use instead of /usr/share/common-licenses "
                  "(repeatable)");
  cmd->callback([&args] { RunText(args); });
}

}  // namespace

void RegisterGen(CLI::App& app) {
  static ShopArgs shop;
  static TextArgs text;
  auto* gen = app.add_subcommand("gen", "Generate synthetic data: shop (ranking), text (GPT)");
  gen->require_subcommand(1, 1);
  AddShop(gen, shop);
  AddText(gen, text);
}

}  // namespace topspin::cli
