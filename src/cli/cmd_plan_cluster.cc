// topspin plan cluster --data SIZE [--nodes N --cores C --memory M]
//                      [--partition SIZE] [--tasks-per-core K]
//                      [--core-rate MBPS | --from-bench FILE] [--json]
//
// Sizing a preprocessing (conversion) job on a Spark-style cluster
// (topspin/plan/cluster_plan.h): partitions, task slots, waves, time from a
// measured per-core rate, shuffle memory, a spill warning and what to do.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/progress.h"
#include "topspin/plan/cluster_plan.h"

namespace topspin::cli {
namespace {

struct ClusterArgs {
  std::string data;
  int64_t nodes = 1;
  int64_t cores = 8;
  std::string memory = "32GB";
  std::string partition = "128MiB";
  int64_t tasks_per_core = 0;
  double core_mbps = 0;
  std::string from_bench;
  bool json = false;
};

// MB/s per core from `topspin bench convert --json FILE`: the Spark path's
// row ("spark local[N] csv -> dataset, per core": the job this plan sizes)
// when the bench ran it, else the "csv -> shards, N threads" row's MB/s
// over its N threads. `row` says which.
double CoreRateFromBench(const std::string& file, std::string* row) {
  const auto fail = [&](const std::string& why) {
    return DataError(fmt::format("not a `topspin bench convert --json` file: {}", why),
                     ErrorWhere{.file = file, .field = "rows"},
                     "run build/topspin bench convert --json FILE on the conversion machine");
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(ReadFile(file));
  } catch (const nlohmann::json::exception& e) {
    throw fail(e.what());
  }
  if (doc.value("workload", "") != "convert" || !doc.contains("rows")) throw fail("no convert rows");
  for (const auto& r : doc["rows"]) {
    const std::string name = r.value("case", "");
    if (name.starts_with("spark local[") && r.value("ours", 0.0) > 0) {
      *row = name;
      return r.value("ours", 0.0);
    }
  }
  for (const auto& r : doc["rows"]) {
    const std::string name = r.value("case", "");
    int threads = 0;
    if (std::sscanf(name.c_str(), "csv -> shards, %d threads", &threads) == 1 && threads > 0) {
      *row = name;
      return r.value("ours", 0.0) / threads;
    }
  }
  throw fail("no \"csv -> shards, N threads\" row");
}

std::string Gb(double bytes) { return fmt::format("{:.1f} GB", bytes / double(1 << 30)); }

void RunCluster(const ClusterArgs& a) {
  ClusterPlanInputs in;
  in.data_bytes = ParseDataSize(a.data, "--data");
  in.nodes = a.nodes;
  in.cores = a.cores;
  in.memory_bytes = ParseDataSize(a.memory, "--memory");
  in.partition_bytes = ParseDataSize(a.partition, "--partition");
  in.tasks_per_core = a.tasks_per_core;
  if (a.core_mbps > 0) {
    in.core_bytes_per_s = a.core_mbps * 1e6;
    in.rate_source = "given (--core-rate)";
  } else if (!a.from_bench.empty()) {
    std::string row;
    in.core_bytes_per_s = CoreRateFromBench(a.from_bench, &row) * 1e6;
    in.rate_source = fmt::format("measured: topspin bench convert, {}, row \"{}\"", a.from_bench, row);
  } else {
    in.rate_source =
        "topspin bench convert on the reference 2-core VM, docs/BENCHMARKS.md; measure yours and "
        "pass --core-rate MB/s (the bench's MB/s over its threads)";
  }
  const ClusterPlan p = PlanCluster(in);
  if (a.json) {
    nlohmann::ordered_json j{{"data_bytes", in.data_bytes}, {"nodes", in.nodes},
                             {"cores_per_node", in.cores}, {"memory_bytes_per_node", in.memory_bytes},
                             {"partition_bytes", in.partition_bytes}, {"partitions", p.partitions},
                             {"slots", p.slots}, {"waves", p.waves}, {"seconds", p.seconds},
                             {"node_hours", p.node_hours}, {"shuffle_bytes", p.shuffle_bytes},
                             {"shuffle_bytes_per_node", p.shuffle_bytes_per_node},
                             {"spills", p.spills}, {"nodes_without_spill", p.nodes_without_spill},
                             {"seconds_without_spill", p.seconds_without_spill},
                             {"node_hours_without_spill", p.node_hours_without_spill},
                             {"memory_without_spill", p.memory_without_spill},
                             {"core_bytes_per_s", in.core_bytes_per_s}, {"notes", p.notes},
                             {"recommendation", p.recommendation}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("input        {} in partitions of {} (sizes as Spark reads them: 1 GB = 2^30 bytes)\n",
             Gb(in.data_bytes), fmt::format("{:.0f} MiB", in.partition_bytes / double(1 << 20)));
  fmt::print("cluster      {} nodes x {} cores, {} memory each\n\n", in.nodes, in.cores,
             Gb(in.memory_bytes));
  fmt::print("{:<34} {:>14}\n", "partitions (tasks)", p.partitions);
  fmt::print("{:<34} {:>14}\n", "task slots (one per core)", p.slots);
  fmt::print("{:<34} {:>14}\n", "waves", p.waves);
  fmt::print("{:<34} {:>14}\n", "time", FormatDuration(p.seconds));
  fmt::print("{:<34} {:>14.2f}\n", "node-hours", p.node_hours);
  fmt::print("{:<34} {:>14}\n", "shuffle/join memory (3x data)", Gb(p.shuffle_bytes));
  fmt::print("{:<34} {:>14}\n", "  per node", Gb(p.shuffle_bytes_per_node));
  fmt::print("{:<34} {:>14}\n", "spills to disk", p.spills ? "yes" : "no");
  fmt::print("\n");
  for (const std::string& n : p.notes) fmt::print("note: {}\n", n);
  fmt::print("\nrecommendation: {}\n", p.recommendation);
}

}  // namespace

void RegisterPlanCluster(CLI::App& plan) {
  auto a = std::make_shared<ClusterArgs>();
  CLI::App* cmd = plan.add_subcommand(
      "cluster", "Size a preprocessing cluster: partitions, waves, time, shuffle memory");
  cmd->add_option("--data", a->data, "input size, e.g. 500GB or 1.5TB")->required();
  cmd->add_option("--nodes", a->nodes, "nodes (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--cores", a->cores, "cores per node (default 8)")->check(CLI::PositiveNumber);
  cmd->add_option("--memory", a->memory, "memory per node (default 32GB)");
  cmd->add_option("--partition", a->partition, "partition size (default 128MiB, Spark's maxPartitionBytes)");
  cmd->add_option("--tasks-per-core", a->tasks_per_core,
                  "tasks you plan to run per core (the plan says what that does)")
      ->check(CLI::PositiveNumber);
  auto* rate = cmd->add_option("--core-rate", a->core_mbps,
                               "conversion MB/s per core (default: the reference VM's)")
                   ->check(CLI::PositiveNumber);
  cmd->add_option("--from-bench", a->from_bench,
                  "the per-core rate from a `topspin bench convert --json FILE` of this machine")
      ->excludes(rate)
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", a->json, "print the plan as JSON instead of the table");
  cmd->callback([a] { RunCluster(*a); });
}

}  // namespace topspin::cli
