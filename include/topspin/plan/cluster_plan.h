// `topspin plan cluster`: sizing a preprocessing (conversion) job on a
// Spark-style cluster the way a data engineer does it: input partitions
// of about 128 MiB, one running task per core, waves of tasks, time from a
// measured per-core conversion rate, and shuffle and join memory at about
// 3x the data.
//
// Sizes are read and printed as Spark reads them: 1 GB = 2^30 bytes (and
// GiB, MB, KB, TB alike), so 500GB in 128 MiB partitions is 4,000.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

// "500GB", "1.5TiB", "128MiB", "64m", "1000000" (bytes) -> bytes. Error{kUsage}
// naming `field` for anything else.
double ParseDataSize(std::string_view text, std::string_view field);

// The per-core rate `topspin bench convert` measured on the reference VM
// (docs/BENCHMARKS.md, convert: 46.67 MB/s on 2 threads): the default
// when no --core-rate is given, and said to be one.
inline constexpr double kReferenceCoreBytesPerS = 23.3e6;

struct ClusterPlanInputs {
  double data_bytes = 0;           // the input, > 0
  int64_t nodes = 1;               // > 0
  int64_t cores = 8;               // per node, > 0
  double memory_bytes = 32.0 * (1 << 30);  // per node, > 0
  double partition_bytes = 128.0 * (1 << 20);
  int64_t tasks_per_core = 0;      // what the user asked for (0: not given, means 1)
  double core_bytes_per_s = kReferenceCoreBytesPerS;
  std::string rate_source = "topspin bench convert on the reference 2-core VM";
  double shuffle_factor = 3.0;     // shuffle and join memory per byte of input
};

struct ClusterPlan {
  int64_t partitions = 0;          // ceil(data / partition)
  int64_t slots = 0;               // tasks running at once: nodes x cores
  int64_t waves = 0;               // ceil(partitions / slots)
  double seconds = 0;              // waves x partition / core rate
  double node_hours = 0;
  double shuffle_bytes = 0;        // data x shuffle_factor, all nodes
  double shuffle_bytes_per_node = 0;
  bool spills = false;             // shuffle_bytes_per_node > memory per node
  // Scale out: the nodes whose memory holds the shuffle, with their time
  // and node-hours; scale up: the memory per node the current count needs.
  int64_t nodes_without_spill = 0;
  double seconds_without_spill = 0, node_hours_without_spill = 0;
  double memory_without_spill = 0;
  std::vector<std::string> notes;  // tasks per core, spill, the rate's source
  std::string recommendation;
};

// Error{kConfig} naming the field for a value out of range.
ClusterPlan PlanCluster(const ClusterPlanInputs& in);

}  // namespace topspin
