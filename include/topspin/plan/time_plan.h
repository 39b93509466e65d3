// `topspin plan time`: how long a GPT run takes on a cluster, what its
// gradients' communication costs per step, and the model and token count
// a fixed cluster and deadline should train (cluster-optimal) next to the
// compute-optimal point of the same FLOPs.
#pragma once

#include <cstdint>
#include <string>

#include "topspin/plan/gpu_spec.h"
#include "topspin/plan/scaling_law.h"
#include "topspin/plan/transformer_cost.h"

namespace topspin {

struct TimePlanInputs {
  GptShape shape;
  double tokens = 0;              // D: tokens to train on, > 0
  int64_t gpus = 1;               // > 0
  GpuSpec gpu;
  double peak_flops = 0;          // per GPU (0: the GPU's bf16 peak; see PeakFlops)
  double mfu = 0.40;              // (0, 1]
  std::string mfu_source = "assumed";
  int zero_stage = 0;             // 0..3
  int64_t step_tokens = 0;        // tokens per optimizer step, all ranks (> 0)
  double link_bytes_per_s = 0;    // 0: the GPU's NVLink within a node, its NIC beyond
  bool overlap = true;            // communication runs under the backward pass
};

struct TimePlan {
  double flops_per_token = 0;     // TrainingFlopsPerToken: the FLOPs MFU counts
  double flops = 0;               // flops_per_token x tokens
  double steps = 0;               // tokens / step_tokens
  double peak_flops = 0;          // per GPU, as used
  double compute_s_per_step = 0;  // step FLOPs / (gpus x peak x mfu)
  double comm_bytes_per_step = 0; // per GPU: ring all-reduce 2 (n-1)/n x 4 bytes
                                  // per parameter; ZeRO-3 3 (n-1)/n
  double link_bytes_per_s = 0;    // the link it was timed on
  std::string link;               // "NVLink", "network", "given"
  double comm_s_per_step = 0;
  double exposed_comm_s_per_step = 0;  // what the backward (2/3 of compute) cannot hide
  bool comm_bound = false;        // communication exceeds compute
  double seconds = 0;             // steps x (compute + exposed communication)
  double gpu_hours = 0;
};

// Error{kConfig} naming the field for a value out of range.
TimePlan PlanTrainingTime(const TimePlanInputs& in);

// For a cluster and a deadline: the FLOPs it delivers (gpus x peak x MFU x
// seconds, less the exposed communication's share), their
// compute-optimal point under `law`, and the cluster-optimal one, which
// also respects what the cluster can hold (the model state, 16 bytes per
// parameter sharded over every GPU by ZeRO-3, in at most 80% of each
// GPU's memory, the rest for activations) and the data there is
// (max_tokens, 0: unlimited). Along a fixed budget the loss has one
// minimum in N, so the constrained optimum is N* clamped into
// [C / (6 max_tokens), N_max].
struct ClusterOptimalInputs {
  int64_t gpus = 1;
  GpuSpec gpu;
  double peak_flops = 0;          // per GPU (0: the GPU's bf16 peak)
  double mfu = 0.40;
  double hours = 0;               // the deadline, > 0
  double comm_overhead = 0;       // exposed communication / compute (from PlanTrainingTime)
  double max_tokens = 0;          // 0: unlimited
  ScalingLaw law = EpochLaw();
};

struct ClusterOptimal {
  double compute = 0;               // FLOPs the cluster delivers by the deadline
  ComputeOptimalPoint compute_optimal;
  ComputeOptimalPoint cluster_optimal;  // compute, parameters, tokens, loss
  double max_parameters = 0;        // N_max the memory allows
  std::string limited_by;           // "", "memory", "data"
};

ClusterOptimal PlanClusterOptimal(const ClusterOptimalInputs& in);

}  // namespace topspin
