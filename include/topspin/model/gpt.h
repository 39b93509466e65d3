// A GPT-2-style decoder in LibTorch: the model `topspin bench dist`
// trains data parallel, and the shape topspin/plan/transformer_cost.h
// costs (GptShape: learned positions, pre-LayerNorm blocks with biases,
// GELU MLP, final LayerNorm, head tied to the token embedding or its own).
//
//   tokens [B, T] -> wte + wpe -> L x (x += attn(ln1 x); x += mlp(ln2 x))
//                 -> ln_f -> logits [B, T, vocab]
//
// Attention is causal multi-head scaled_dot_product_attention (flash or
// memory-efficient kernels on CUDA, a fused kernel on the CPU). Initialisation follows GPT-2: normal(0, 0.02) weights,
// zero biases, and the residual projections scaled by 1 / sqrt(2 L).
// Every parameter is dense, so all of them go into FlatParams.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/plan/transformer_cost.h"

namespace torch::nn {
class Module;
}

namespace topspin {

// How the GPT computes what it computes: each field is one of the
// speed-ups docs/BENCHMARKS.md measures on and off (model.gpt.attention,
// model.gpt.fused_ops). Every choice gives the same function; generation
// (Extend) always takes the fused kernels.
struct GptKernels {
  enum class Attention {
    kSdpa,      // scaled_dot_product_attention, is_causal: the mask is never made
    kSdpaMask,  // scaled_dot_product_attention with a stored [context, context] mask
    kComposed,  // q k^T / sqrt(d), the stored mask, softmax, times v: [T, T] in memory
  };
  Attention attention = Attention::kSdpa;
  // LibTorch's LayerNorm and GELU kernels (false: composed from mean,
  // variance, erf or tanh).
  bool fused_ops = true;
};

class Gpt {
 public:
  // Error{kConfig} naming the field for a shape ParameterCount() refuses.
  Gpt(const GptShape& shape, uint64_t seed);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // tokens [B, T] int64 with T <= context -> logits [B, T, vocab].
  at::Tensor Logits(const at::Tensor& tokens) const;

  // Incremental decoding (generation): each block's keys and values
  // [B, heads, length, d_model / heads] for the `length` tokens seen.
  struct KvCache {
    std::vector<at::Tensor> keys, values;
    int64_t length = 0;
  };
  // Logits [B, t, vocab] of `tokens` [B, t] that follow the cache's
  // tokens (at positions cache.length ..), which it then holds too; equal
  // to the last t rows of Logits() over all the tokens. Error{kInternal}
  // past the context (cache.length + t > context: start a new cache).
  at::Tensor Extend(const at::Tensor& tokens, KvCache& cache) const;
  // Sum of the next-token cross-entropies of windows [B, T + 1]: inputs
  // [:, :T], targets [:, 1:]. A sum (not a mean), so data-parallel ranks
  // add their parts and divide by the global count once.
  at::Tensor LossSum(const at::Tensor& windows) const;

  // From now on, training forwards (Logits, LossSum) compute this way.
  void SetKernels(const GptKernels& kernels);
  const GptKernels& kernels() const;

  torch::nn::Module& module();
  const GptShape& shape() const;

  // Brackets around each unit's use in Logits, for ZeRO-3
  // (topspin/ddp/zero3.h: Gather before, Release after).
  class UnitHooks {
   public:
    virtual ~UnitHooks() = default;
    virtual void Before(size_t unit) = 0;
    virtual at::Tensor After(size_t unit, const at::Tensor& output) = 0;
  };
  // The parameters in units of `blocks_per_unit` blocks (the wrap
  // granularity): unit 0 holds the embeddings, the final LayerNorm and an
  // untied head, used at both ends of forward (gathered for all of it);
  // unit 1 + g holds blocks [g * blocks_per_unit, (g + 1) * blocks_per_unit).
  std::vector<std::vector<at::Tensor>> Units(int64_t blocks_per_unit);
  // Logits brackets the units of Units(blocks_per_unit) with `hooks` from
  // now on (nullptr: no brackets).
  void SetUnitHooks(UnitHooks* hooks, int64_t blocks_per_unit);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
