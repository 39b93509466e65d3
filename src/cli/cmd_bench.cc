// topspin bench <workload>: named benchmarks, each one table comparing our
// figure with a peer measured in the same run.
#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/files.h"
#include "topspin/perf/bench_table.h"

namespace topspin::cli {
namespace {

struct BenchArgs {
  std::string json_path;
  int mib = 64;
  int repeats = 5;
};

void Report(const BenchTable& table, const BenchArgs& args) {
  fmt::print("{}", FormatBenchTable(table));
  if (!args.json_path.empty()) WriteFileAtomic(args.json_path, BenchTableJson(table));
}

}  // namespace

void RegisterBench(CLI::App& app) {
  static BenchArgs args;
  auto* bench =
      app.add_subcommand("bench", "Run a named benchmark against its peer in the same run");
  bench->require_subcommand(1, 1);
  auto* core = bench->add_subcommand(
      "core", "crc32c, xxh3 and Philox throughput vs memcpy and std::mt19937_64");
  core->add_option("--json", args.json_path, "also write the table as JSON to this file");
  core->add_option("--mib", args.mib, "buffer size in MiB")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  core->add_option("--repeats", args.repeats, "timed runs; the best is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  core->callback([] { Report(RunCoreBench(size_t(args.mib) << 20, args.repeats), args); });
}

}  // namespace topspin::cli
