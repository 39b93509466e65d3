#include "topspin/plan/transformer_cost.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

template <typename T>
void RequirePositive(T value, const char* field) {
  if (value > 0) return;
  throw ConfigError(fmt::format("{} must be positive, got {}", field, value),
                    ErrorWhere{.field = field}, fmt::format("set {} to a value above 0", field));
}

void Validate(const GptShape& s) {
  RequirePositive(s.vocab, "vocab");
  RequirePositive(s.context, "context");
  RequirePositive(s.layers, "layers");
  RequirePositive(s.d_model, "d_model");
  RequirePositive(s.heads, "heads");
  RequirePositive(s.d_ff, "d_ff");
  if (s.d_model % s.heads != 0) {
    throw ConfigError(
        fmt::format("d_model ({}) is not divisible by heads ({})", s.d_model, s.heads),
        ErrorWhere{.field = "d_model"}, "choose heads that divide d_model, e.g. d_model / 64");
  }
}

// Weights and biases of one pre-LayerNorm transformer block.
int64_t BlockParameters(const GptShape& s) {
  const int64_t d = s.d_model;
  const int64_t layer_norms = 2 * (2 * d);
  const int64_t qkv = d * 3 * d + 3 * d;
  const int64_t attn_out = d * d + d;
  const int64_t mlp = (d * s.d_ff + s.d_ff) + (s.d_ff * d + d);
  return layer_norms + qkv + attn_out + mlp;
}

int64_t EmbeddingParameters(const GptShape& s) {
  const int64_t head = s.tied_embeddings ? 0 : s.vocab * s.d_model;
  return s.vocab * s.d_model + s.context * s.d_model + head;
}

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void Validate(const MemoryPlan& p) {
  RequirePositive(p.parameters, "parameters");
  RequirePositive(p.world_size, "world_size");
  if (p.optimizer_states < 0) {
    throw ConfigError(fmt::format("optimizer_states must be >= 0, got {}", p.optimizer_states),
                      ErrorWhere{.field = "optimizer_states"}, "AdamW keeps 2 states, SGD 1");
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    throw ConfigError(fmt::format("zero_stage must be 0, 1, 2 or 3, got {}", p.zero_stage),
                      ErrorWhere{.field = "zero_stage"}, "use 0 (no sharding) up to 3 (shard all)");
  }
}

}  // namespace

int64_t ParameterCount(const GptShape& shape) {
  Validate(shape);
  const int64_t final_norm = 2 * shape.d_model;
  return EmbeddingParameters(shape) + shape.layers * BlockParameters(shape) + final_norm;
}

int64_t BlockParameterCount(const GptShape& shape) {
  Validate(shape);
  return BlockParameters(shape);
}

int64_t NonEmbeddingParameterCount(const GptShape& shape) {
  return ParameterCount(shape) - EmbeddingParameters(shape);
}

double TrainingFlopsPerToken(const GptShape& shape) {
  const double n = static_cast<double>(NonEmbeddingParameterCount(shape));
  const double attention = 2.0 * static_cast<double>(shape.layers) *
                           static_cast<double>(shape.context) * static_cast<double>(shape.d_model);
  const double forward = 2.0 * n + attention;
  return 3.0 * forward;
}

double Mfu(double tokens_per_s, double flops_per_token, double peak_flops) {
  if (!(tokens_per_s >= 0)) {
    throw ConfigError(fmt::format("tokens_per_s must be >= 0, got {}", tokens_per_s),
                      ErrorWhere{.field = "tokens_per_s"}, "pass the measured throughput");
  }
  RequirePositive(flops_per_token, "flops_per_token");
  RequirePositive(peak_flops, "peak_flops");
  return tokens_per_s * flops_per_token / peak_flops;
}

ComputeOptimalSize ComputeOptimal(double compute_flops) {
  RequirePositive(compute_flops, "compute_flops");
  constexpr double kTokensPerParameter = 20.0;
  constexpr double kFlopsPerParameterToken = 6.0;
  const double n = std::sqrt(compute_flops / (kFlopsPerParameterToken * kTokensPerParameter));
  return {.parameters = n, .tokens = kTokensPerParameter * n};
}

MemoryEstimate EstimateTrainingMemory(const MemoryPlan& plan) {
  Validate(plan);
  const int64_t full = plan.parameters;
  const int64_t shard = CeilDiv(plan.parameters, plan.world_size);
  const bool bf16 = plan.precision == ParamPrecision::kBf16;
  const int64_t param_size = bf16 ? 2 : 4;
  MemoryEstimate m;
  m.param_bytes = (plan.zero_stage >= 3 ? shard : full) * param_size;
  m.grad_bytes = (plan.zero_stage >= 2 ? shard : full) * param_size;
  const int64_t optimizer_elements = plan.zero_stage >= 1 ? shard : full;
  m.master_bytes = bf16 ? optimizer_elements * 4 : 0;
  m.optimizer_bytes = optimizer_elements * 4 * plan.optimizer_states;
  m.total_bytes = m.param_bytes + m.grad_bytes + m.master_bytes + m.optimizer_bytes;
  return m;
}

}  // namespace topspin
