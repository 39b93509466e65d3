#include "topspin/plan/time_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "plan/require.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

// Bytes each GPU sends per step for the gradients of `parameters` fp32
// values: a ring all-reduce (or ZeRO-1/2's reduce-scatter plus the
// parameters' all-gather) moves 2 (n - 1) / n of them; ZeRO-3 gathers
// the parameters twice (forward and backward) and reduce-scatters once.
double CommBytesPerStep(double parameters, int64_t gpus, int zero_stage) {
  if (gpus <= 1) return 0;
  const double n = static_cast<double>(gpus);
  const double passes = zero_stage >= 3 ? 3.0 : 2.0;
  return passes * (n - 1) / n * 4.0 * parameters;
}

}  // namespace

TimePlan PlanTrainingTime(const TimePlanInputs& in) {
  Require(in.tokens > 0, "tokens", in.tokens, "above 0");
  Require(in.gpus > 0, "gpus", static_cast<double>(in.gpus), "above 0");
  Require(in.mfu > 0 && in.mfu <= 1, "mfu", in.mfu, "in (0, 1]");
  Require(in.step_tokens > 0, "step_tokens", static_cast<double>(in.step_tokens), "above 0");
  Require(in.zero_stage >= 0 && in.zero_stage <= 3, "zero", in.zero_stage, "0, 1, 2 or 3");
  TimePlan p;
  p.flops_per_token = TrainingFlopsPerToken(in.shape);
  p.flops = p.flops_per_token * in.tokens;
  p.steps = in.tokens / static_cast<double>(in.step_tokens);
  p.peak_flops = in.peak_flops > 0 ? in.peak_flops : in.gpu.bf16_flops;
  const double cluster = static_cast<double>(in.gpus) * p.peak_flops * in.mfu;
  p.compute_s_per_step = p.flops_per_token * static_cast<double>(in.step_tokens) / cluster;
  p.comm_bytes_per_step =
      CommBytesPerStep(static_cast<double>(ParameterCount(in.shape)), in.gpus, in.zero_stage);
  if (in.link_bytes_per_s > 0) {
    p.link_bytes_per_s = in.link_bytes_per_s;
    p.link = "given";
  } else if (in.gpus <= in.gpu.gpus_per_node) {
    p.link_bytes_per_s = in.gpu.intra_node_bytes_per_s;
    p.link = "NVLink";
  } else {
    // A ring over several nodes runs at its slowest hop: the NIC.
    p.link_bytes_per_s = in.gpu.inter_node_bytes_per_s;
    p.link = "network";
  }
  p.comm_s_per_step = p.comm_bytes_per_step / p.link_bytes_per_s;
  const double hidden = in.overlap ? p.compute_s_per_step * 2.0 / 3.0 : 0.0;
  p.exposed_comm_s_per_step = std::max(0.0, p.comm_s_per_step - hidden);
  p.comm_bound = p.comm_s_per_step > p.compute_s_per_step;
  p.seconds = p.steps * (p.compute_s_per_step + p.exposed_comm_s_per_step);
  p.gpu_hours = p.seconds * static_cast<double>(in.gpus) / 3600.0;
  return p;
}

ClusterOptimal PlanClusterOptimal(const ClusterOptimalInputs& in) {
  Require(in.gpus > 0, "gpus", static_cast<double>(in.gpus), "above 0");
  Require(in.hours > 0, "hours", in.hours, "above 0");
  Require(in.mfu > 0 && in.mfu <= 1, "mfu", in.mfu, "in (0, 1]");
  Require(in.comm_overhead >= 0, "comm_overhead", in.comm_overhead, "at least 0");
  Require(in.max_tokens >= 0, "max_tokens", in.max_tokens, "at least 0");
  ClusterOptimal c;
  const double peak = in.peak_flops > 0 ? in.peak_flops : in.gpu.bf16_flops;
  c.compute = static_cast<double>(in.gpus) * peak * in.mfu * in.hours * 3600.0 /
              (1.0 + in.comm_overhead);
  c.compute_optimal = ComputeOptimalFor(in.law, c.compute);
  c.max_parameters = 0.8 * in.gpu.memory_bytes * static_cast<double>(in.gpus) / 16.0;
  double n = c.compute_optimal.parameters;
  if (n > c.max_parameters) {
    n = c.max_parameters;
    c.limited_by = "memory";
  }
  double tokens = c.compute / (6.0 * n);
  if (in.max_tokens > 0 && tokens > in.max_tokens) {
    // Fewer tokens than the budget wants: a larger model spends it, up to
    // what the memory holds; past that the budget is not spent.
    tokens = in.max_tokens;
    n = std::min(c.max_parameters, c.compute / (6.0 * tokens));
    c.limited_by = c.limited_by.empty() ? "data" : "memory and data";
  }
  ComputeOptimalPoint& p = c.cluster_optimal;
  p.compute = 6.0 * n * tokens;
  p.parameters = n;
  p.tokens = tokens;
  p.tokens_per_parameter = p.tokens / n;
  p.loss = in.law.Loss(p.parameters, p.tokens);
  return c;
}

}  // namespace topspin
