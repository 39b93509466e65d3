#include "topspin/plan/cluster_plan.h"

#include <cctype>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "plan/require.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

int64_t CeilDiv(double a, double b) { return static_cast<int64_t>(std::ceil(a / b - 1e-9)); }

std::string Gib(double bytes) { return fmt::format("{:.0f} GB", bytes / double(1 << 30)); }

std::string Duration(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

double ParseDataSize(std::string_view text, std::string_view field) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Unit {
    const char* name;
    int power;  // of 1024
  };
  static constexpr Unit kUnits[] = {{"", 0},   {"b", 0},   {"k", 1},  {"kb", 1},   {"kib", 1},
                                    {"m", 2},  {"mb", 2},  {"mib", 2}, {"g", 3},   {"gb", 3},
                                    {"gib", 3}, {"t", 4},  {"tb", 4},  {"tib", 4}};
  double scale = -1;
  for (const Unit& u : kUnits) {
    if (unit == u.name) scale = std::pow(1024.0, u.power);
  }
  if (end == s.c_str() || scale < 0 || !(value > 0) || !std::isfinite(value)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} \"{}\" is not a size", field, text),
                ErrorWhere{.field = std::string(field)},
                "write it like 500GB, 1.5TB or 128MiB (1 GB = 2^30 bytes, as Spark reads it)");
  }
  return value * scale;
}

ClusterPlan PlanCluster(const ClusterPlanInputs& in) {
  Require(in.data_bytes > 0, "--data", in.data_bytes, "above 0");
  Require(in.nodes > 0, "--nodes", static_cast<double>(in.nodes), "above 0");
  Require(in.cores > 0, "--cores", static_cast<double>(in.cores), "above 0");
  Require(in.memory_bytes > 0, "--memory", in.memory_bytes, "above 0");
  Require(in.partition_bytes > 0, "--partition", in.partition_bytes, "above 0");
  Require(in.core_bytes_per_s > 0, "--core-rate", in.core_bytes_per_s, "above 0");
  Require(in.tasks_per_core >= 0, "--tasks-per-core", static_cast<double>(in.tasks_per_core),
          "at least 1");
  ClusterPlan p;
  p.partitions = CeilDiv(in.data_bytes, in.partition_bytes);
  p.slots = in.nodes * in.cores;
  p.waves = CeilDiv(static_cast<double>(p.partitions), static_cast<double>(p.slots));
  const double task_s = std::min(in.partition_bytes, in.data_bytes) / in.core_bytes_per_s;
  p.seconds = static_cast<double>(p.waves) * task_s;
  p.node_hours = p.seconds * static_cast<double>(in.nodes) / 3600;
  p.shuffle_bytes = in.data_bytes * in.shuffle_factor;
  p.shuffle_bytes_per_node = p.shuffle_bytes / static_cast<double>(in.nodes);
  p.spills = p.shuffle_bytes_per_node > in.memory_bytes;
  p.nodes_without_spill = std::max<int64_t>(in.nodes, CeilDiv(p.shuffle_bytes, in.memory_bytes));
  const int64_t waves_out =
      CeilDiv(static_cast<double>(p.partitions), static_cast<double>(p.nodes_without_spill * in.cores));
  p.seconds_without_spill = static_cast<double>(waves_out) * task_s;
  p.node_hours_without_spill =
      p.seconds_without_spill * static_cast<double>(p.nodes_without_spill) / 3600;
  p.memory_without_spill = std::max(in.memory_bytes, p.shuffle_bytes_per_node);

  p.notes.push_back(fmt::format("time from {:.1f} MB/s per core ({})", in.core_bytes_per_s / 1e6,
                                in.rate_source));
  if (in.tasks_per_core > 1) {
    const int64_t claimed = p.slots * in.tasks_per_core;
    p.notes.push_back(fmt::format(
        "--tasks-per-core {}: {} tasks would be scheduled at once ({:.0f} waves), but {} cores run "
        "{} CPU-bound tasks at a time; each task runs at 1/{} speed with 1/{} of the memory, so the "
        "wall time is that of {} waves. \"2-3 tasks per core\" is advice on how many partitions "
        "to cut, not on how many run at once",
        in.tasks_per_core, claimed, std::ceil(double(p.partitions) / double(claimed)), p.slots,
        p.slots, in.tasks_per_core, in.tasks_per_core, p.waves));
  }
  if (p.spills) {
    p.notes.push_back(fmt::format(
        "shuffles and joins need about {}x the data, {} in all: {} per node against {} of memory; "
        "the rest spills to disk, which is slower and needs the local disk to hold it",
        in.shuffle_factor, Gib(p.shuffle_bytes), Gib(p.shuffle_bytes_per_node), Gib(in.memory_bytes)));
    p.recommendation = fmt::format(
        "scale out to {} nodes, whose memory holds the {} of shuffle ({} waves in {}, {:.1f} "
        "node-hours, against {} and {:.1f} node-hours spilling on {}), or scale up to {} per "
        "node on {} nodes",
        p.nodes_without_spill, Gib(p.shuffle_bytes), waves_out, Duration(p.seconds_without_spill),
        p.node_hours_without_spill, Duration(p.seconds), p.node_hours, in.nodes,
        Gib(p.memory_without_spill), in.nodes);
  } else {
    p.recommendation = fmt::format(
        "{} nodes hold the shuffle ({} per node of {}); more nodes only shorten the {} waves",
        in.nodes, Gib(p.shuffle_bytes_per_node), Gib(in.memory_bytes), p.waves);
  }
  return p;
}

}  // namespace topspin
