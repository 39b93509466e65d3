#include "topspin/plan/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

// Weights the matmuls read: every block's four linears and the head.
int64_t MatmulWeights(const GptShape& s) {
  const int64_t d = s.d_model;
  return s.layers * (3 * d * d + d * d + 2 * d * s.d_ff) + s.vocab * d;
}

// One block's saved activations in bytes, for B x T tokens.
int64_t LayerBytes(const GptShape& s, int64_t tokens, int64_t batch, const GptMemoryInputs& in) {
  const int64_t btd = tokens * s.d_model;
  const int64_t btf = tokens * s.d_ff;
  int64_t bytes = 0;
  if (in.bf16) {
    // Under autocast the residual stream and the LayerNorms stay fp32; the
    // matmuls keep bf16 casts of their inputs and make bf16 outputs.
    bytes = btd * (4 /*x*/ + 2 /*qkv in*/ + 3 * 2 /*q,k,v*/ + 2 /*attn out*/ + 2 /*proj in*/ +
                   4 /*h*/ + 2 /*fc in*/) +
            btf * (2 + 2) /*hidden, gelu*/;
  } else {
    bytes = 4 * (btd * 9 + btf * 2);
  }
  if (in.materialised_attention) {
    const int64_t t = s.context;
    bytes += batch * s.heads * t * t * (in.bf16 ? 2 : 4);
  }
  return bytes;
}

int64_t HeadBytes(const GptShape& s, int64_t tokens) {
  return 4 * (2 * tokens * s.d_model + 2 * tokens * s.vocab);
}

}  // namespace

GptShape GptShapeFromConfig(const GptModelConfig& gpt) {
  const int64_t m = std::max<int64_t>(1, gpt.vocab_multiple);
  return {.vocab = (gpt.vocab + m - 1) / m * m,
          .context = gpt.context,
          .layers = gpt.layers,
          .d_model = gpt.d_model,
          .heads = gpt.heads,
          .d_ff = gpt.d_ff > 0 ? gpt.d_ff : 4 * gpt.d_model,
          .tied_embeddings = gpt.tied_embeddings,
          .gelu_tanh = gpt.gelu == "tanh"};
}

GptMemoryInputs GptMemoryInputsFrom(const Settings& s) {
  if (s.model.kind != "gpt") {
    throw ConfigError(fmt::format("the memory plan is for GPT configs, and model.kind is \"{}\"",
                                  s.model.kind),
                      ErrorWhere{.field = "model.kind"},
                      "give a config with model.kind: gpt (configs/gpt2-124m.yaml, ...)");
  }
  GptMemoryInputs in;
  in.shape = GptShapeFromConfig(s.model.gpt);
  in.world_size = std::max<int64_t>(1, s.dist.nproc);
  in.micro_batch = std::max<int64_t>(1, s.pipeline.batch_size / in.world_size);
  in.bf16 = s.train.precision == "bf16";
  in.materialised_attention = s.model.gpt.attention != "sdpa";
  in.zero_stage = static_cast<int>(s.dist.zero);
  in.optimizer_states = s.optim.name == "sgd" ? 1 : 2;
  if (s.pipeline.pinned_memory) {
    in.pinned_bytes = (s.pipeline.prefetch + 1) * in.micro_batch * in.shape.context * 2 * 8;
  }
  return in;
}

GptMemory EstimateGptMemory(const GptMemoryInputs& in) {
  if (in.micro_batch <= 0) {
    throw ConfigError(fmt::format("the micro-batch must be positive, got {}", in.micro_batch),
                      ErrorWhere{.field = "pipeline.batch_size"}, "give at least one sequence per rank");
  }
  GptMemory m;
  m.parameters = ParameterCount(in.shape);  // validates the shape
  const MemoryEstimate state = EstimateTrainingMemory(
      MemoryPlan{.parameters = m.parameters, .precision = ParamPrecision::kFp32,
                 .optimizer_states = in.optimizer_states, .zero_stage = in.zero_stage,
                 .world_size = in.world_size});
  const GptShape& s = in.shape;
  const int64_t block = BlockParameterCount(s);
  m.param_bytes = state.param_bytes;
  m.grad_bytes = state.grad_bytes + (in.zero_stage >= 2 && in.world_size > 1 ? 4 * block : 0);
  m.optimizer_bytes = state.optimizer_bytes + state.master_bytes;
  m.weight_copy_bytes = in.bf16 ? 2 * MatmulWeights(s) : 0;
  m.gathered_bytes = in.zero_stage >= 3 && in.world_size > 1 ? 4 * block : 0;
  const int64_t tokens = in.micro_batch * s.context;
  m.layer_bytes = LayerBytes(s, tokens, in.micro_batch, in);
  m.layer_bytes_recompute = 4 * tokens * s.d_model;
  m.activation_bytes = in.recompute ? s.layers * m.layer_bytes_recompute + m.layer_bytes
                                    : s.layers * m.layer_bytes;
  m.head_bytes = HeadBytes(s, tokens);
  m.total_bytes = m.param_bytes + m.grad_bytes + m.optimizer_bytes + m.weight_copy_bytes +
                  m.gathered_bytes + m.activation_bytes + m.head_bytes;
  m.pinned_bytes = in.pinned_bytes;
  return m;
}

MemoryFit FitOnGpu(const GptMemoryInputs& in, const GpuSpec& gpu, const MemoryFitOptions& o) {
  MemoryFit fit;
  fit.usable_bytes = gpu.memory_bytes * (1 - o.margin) - o.reserve_bytes;
  const auto total_at = [&](GptMemoryInputs x, int stage, int64_t batch) {
    x.zero_stage = stage;
    x.micro_batch = batch;
    return static_cast<double>(EstimateGptMemory(x).total_bytes);
  };
  // The largest micro-batch with total <= usable; the total grows with it.
  const auto largest = [&](const GptMemoryInputs& x, int stage) -> int64_t {
    if (total_at(x, stage, 1) > fit.usable_bytes) return 0;
    int64_t lo = 1, hi = 2;
    while (hi <= o.max_micro_batch && total_at(x, stage, hi) <= fit.usable_bytes) lo = hi, hi *= 2;
    hi = std::min(hi, o.max_micro_batch + 1);
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (total_at(x, stage, mid) <= fit.usable_bytes ? lo : hi) = mid;
    }
    return lo;
  };
  const int max_stage = in.world_size > 1 ? 3 : 0;
  for (int stage = 0; stage <= max_stage; ++stage) {
    StageFit f{.zero_stage = stage};
    GptMemoryInputs x = in;
    x.zero_stage = stage;
    f.memory = EstimateGptMemory(x);
    f.fits = static_cast<double>(f.memory.total_bytes) <= fit.usable_bytes;
    f.largest_micro_batch = largest(in, stage);
    fit.stages.push_back(f);
    if (f.fits && fit.recommended_stage < 0) fit.recommended_stage = stage;
  }
  const std::string batch = fmt::format("micro-batch {}", in.micro_batch);
  if (fit.recommended_stage == 0) {
    fit.advice = fmt::format("fits without sharding at {} (dist.zero: 0); the largest micro-batch is {}",
                             batch, fit.stages[0].largest_micro_batch);
  } else if (fit.recommended_stage > 0) {
    fit.advice = fmt::format("set dist.zero: {} (the lowest stage that fits at {}); its largest "
                             "micro-batch is {}",
                             fit.recommended_stage, batch,
                             fit.stages[fit.recommended_stage].largest_micro_batch);
  } else {
    GptMemoryInputs r = in;
    r.recompute = true;
    r.zero_stage = max_stage;
    if (!in.recompute && static_cast<double>(EstimateGptMemory(r).total_bytes) <= fit.usable_bytes) {
      fit.recompute_needed = true;
      fit.advice = fmt::format("nothing fits at {} keeping every activation; with recomputation it "
                               "does at ZeRO {}, or lower the micro-batch",
                               batch, max_stage);
    } else {
      fit.advice = fmt::format("nothing fits at {} on {} x {}: lower the micro-batch, add GPUs "
                               "(ZeRO-3 divides the model state by their count) or shrink the model",
                               batch, in.world_size, gpu.name);
    }
  }
  return fit;
}

}  // namespace topspin
