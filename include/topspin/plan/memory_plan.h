// `topspin plan memory`: the bytes one rank of a GPT training run holds at
// the step's peak, part by part, and what fits on a device.
//
// The model is topspin's GPT (plan/transformer_cost.h) as topspin trains it:
// fp32 weights, gradients and AdamW states (train.precision bf16 autocasts
// the matmuls and keeps bf16 copies of their weights for the backward),
// causal attention through scaled_dot_product_attention (no [T, T] scores
// kept) unless model.gpt.attention materialises them.
//
// Activations, counted per block in elements of B x T x d_model (B
// sequences of T tokens): the block input kept by ln1 (1), ln1's output
// kept by the QKV matmul (1), Q, K and V kept by attention (3), attention's
// output (1) and the copy the projection reads (1), the residual kept by
// ln2 (1), ln2's output (1), the MLP's hidden layer before and after GELU
// (2 x d_ff / d_model): 17 for d_ff = 4 d_model (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", count
// 34 bytes at 2 bytes each, with dropout masks where we have the copy).
// Materialised attention adds the softmax's heads x T x T per sequence.
// Recomputation keeps only each block's input, and one block's full set
// while its backward runs. At the loss: the final LayerNorm's input and
// output, and two B x T x vocab float32 tensors (the log-softmax the
// backward keeps and the gradient flowing into it; the logits are gone by
// then). tune_test checks the total against the peak the counting
// allocator measures for the real step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topspin/core/config_schema.h"
#include "topspin/plan/gpu_spec.h"
#include "topspin/plan/transformer_cost.h"

namespace topspin {

// The GPT a model.gpt section describes (vocab rounded up to vocab_multiple,
// d_ff 0 meaning 4 x d_model).
GptShape GptShapeFromConfig(const GptModelConfig& gpt);

struct GptMemoryInputs {
  GptShape shape;
  int64_t micro_batch = 1;        // sequences per rank per forward, > 0
  bool bf16 = false;              // train.precision bf16 (autocast, fp32 weights)
  bool materialised_attention = false;  // model.gpt.attention composed | sdpa_mask
  bool recompute = false;         // keep each block's input only
  int zero_stage = 0;             // dist.zero, 0..3
  int64_t world_size = 1;         // ranks the sharded state is split over
  int64_t optimizer_states = 2;   // fp32 states per parameter: AdamW 2, SGD 1
  int64_t pinned_bytes = 0;       // host: the pipeline's pinned batch buffers
};

// From a training config: model.gpt, pipeline.batch_size / dist.nproc per
// rank, train.precision, dist.zero, optim.name and the pinned buffers
// (pipeline.pinned_memory: prefetch + 1 batches of int64 tokens and
// targets). Error{kConfig} naming model.kind for a config that is not a GPT.
GptMemoryInputs GptMemoryInputsFrom(const Settings& settings);

struct GptMemory {
  int64_t parameters = 0;
  int64_t param_bytes = 0;        // fp32 weights (a ZeRO-3 shard)
  int64_t grad_bytes = 0;         // fp32 gradients (ZeRO-2/3: a shard, plus the
                                  // staging of one block's full gradients)
  int64_t optimizer_bytes = 0;    // fp32 optimizer states (ZeRO-1+: a shard)
  int64_t weight_copy_bytes = 0;  // bf16 copies of the matmul weights (autocast)
  int64_t gathered_bytes = 0;     // ZeRO-3: one block's weights gathered in full
  int64_t layer_bytes = 0;        // one block's activations, all kept
  int64_t layer_bytes_recompute = 0;  // one block's, recomputing (its input)
  int64_t activation_bytes = 0;   // every block under the chosen policy
  int64_t head_bytes = 0;         // final LayerNorm and the loss
  int64_t total_bytes = 0;        // on the device: all of the above
  int64_t pinned_bytes = 0;       // on the host, not in total_bytes
};

GptMemory EstimateGptMemory(const GptMemoryInputs& in);

// What fits on `gpu`: usable = memory x (1 - margin) - reserve (the CUDA
// context, cuBLAS/cuDNN workspaces and allocator fragmentation).
struct MemoryFitOptions {
  double margin = 0.10;
  double reserve_bytes = 1.5 * 1024 * 1024 * 1024;
  int64_t max_micro_batch = int64_t{1} << 20;
};

struct StageFit {
  int zero_stage = 0;
  GptMemory memory;           // at the configured micro-batch
  bool fits = false;
  int64_t largest_micro_batch = 0;  // 0: not even 1 fits
};

struct MemoryFit {
  double usable_bytes = 0;
  std::vector<StageFit> stages;  // ZeRO 0..3, with and without recomputation as configured
  int recommended_stage = -1;    // the lowest stage that fits (-1: none)
  bool recompute_needed = false; // none fits keeping all activations, one does recomputing
  std::string advice;            // one sentence: what to set
};

MemoryFit FitOnGpu(const GptMemoryInputs& in, const GpuSpec& gpu, const MemoryFitOptions& options);

}  // namespace topspin
