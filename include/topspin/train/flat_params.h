// Flat parameter and gradient buffers (DESIGN "Flat buffers").
//
// FlatParams moves every dense parameter of a module into one contiguous
// float32 buffer `params` [P] and points the parameter at its slice
// (set_data(flat.narrow(0, offset, numel).view(shape))); each gradient is
// likewise a view of one buffer `grads` [P], so autograd accumulates
// straight into it. The dense optimizer (DenseOptimizer) then runs one
// vectorised pass over the two buffers, data-parallel buckets are slices of
// `grads`, and ZeRO shards are ranges of both.
//
// Rules that keep the views valid: never assign a new tensor to a
// parameter or its grad; zero with ZeroGrad() (grads().zero_()), never by
// setting grads undefined; load values with Load() (copy into the buffer).
// Aliased() checks the invariant. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace topspin {

class FlatParams {
 public:
  struct Slot {
    std::string name;
    int64_t offset = 0;
    int64_t numel = 0;
    std::vector<int64_t> shape;
  };

  // Takes the module's parameters (named_parameters order) for which
  // `include(name)` is true; others (embedding tables) stay as they are.
  // Without `flat_grads` (ZeRO-2, where only a shard of the gradient is
  // kept) grads() is empty and autograd allocates each gradient, which
  // GradBuckets moves out and frees.
  explicit FlatParams(torch::nn::Module& module,
                      const std::function<bool(const std::string&)>& include = {},
                      bool flat_grads = true);

  at::Tensor& params() { return params_; }
  at::Tensor& grads() { return grads_; }
  const at::Tensor& params() const { return params_; }
  const at::Tensor& grads() const { return grads_; }
  int64_t numel() const { return params_.numel(); }
  const std::vector<Slot>& slots() const { return slots_; }
  // The flattened parameters, in slots() order.
  const std::vector<at::Tensor>& parameters() const { return parameters_; }

  // Zeroes the flat gradient (or, without one, frees every gradient).
  void ZeroGrad();
  // Copies `values` ([P] float32) into the buffer; the views stay valid.
  void Load(const at::Tensor& values);
  // True while every parameter and its gradient still view the buffers.
  bool Aliased() const;

 private:
  std::vector<Slot> slots_;
  std::vector<at::Tensor> parameters_;  // the module's parameters (shared storage)
  at::Tensor params_, grads_;
};

// AdamW or SGD with momentum over the flat buffers:
//   adamw  g = grad_scale grads;  p *= 1 - lr wd;  m = b1 m + (1 - b1) g;
//          v = b2 v + (1 - b2) g^2;
//          p -= lr m / (1 - b1^t) / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   sgd    g = grad_scale grads;  buf = momentum buf + g + wd p
//          (buf = g + wd p at t = 1);  p -= lr buf
// Options::fused (optim.fused) picks how: fused AdamW is one pass over the
// four buffers (on the CPU our own loop, optimizer_kernels.h; on CUDA
// LibTorch's at::_fused_adamw_ with the scale and the zeroing as two more
// kernels); unfused, the composed tensor ops torch.optim.AdamW's
// single-tensor path runs, one pass each. SGD is at::_fused_sgd_ either way.
// The state lives on the device of the buffers it is made for.
class DenseOptimizer {
 public:
  enum class Kind { kAdamW, kSgd };
  struct Options {
    Kind kind = Kind::kAdamW;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, momentum = 0.9;
    bool fused = true;
  };
  // `like`: the dtype and device of the state (float32, the flat buffer's).
  DenseOptimizer(int64_t numel, const Options& options, const at::TensorOptions& like = {});

  // One step at learning rate lr from grad_scale * grads (the trainer's
  // division by the loss terms and clipping, folded in). Updates params in
  // place and consumes the gradient: grads are zero afterwards.
  void Step(at::Tensor& params, const at::Tensor& grads, double lr, double grad_scale = 1.0);
  int64_t steps() const { return steps_; }
  // The live state tensors, for checkpoints: {m, v} (adamw) or {buf} (sgd).
  // A checkpoint load copies into them, then sets the step count.
  std::vector<at::Tensor> state() const;
  void set_steps(int64_t steps);

 private:
  Options options_;
  int64_t steps_ = 0;
  at::Tensor m_, v_;  // adamw moments, or m_ = sgd momentum buffer
  at::Tensor step_;   // adamw: the step count as the fused kernel keeps it ([] float32)
};

// The squared L2 norm of a float32 tensor, accumulated in double: a [1]
// double tensor on its device (read back with the step's other totals). On
// the CPU one read pass without temporaries, the same for any thread count.
// Non-finite exactly when some element is.
at::Tensor SquaredNorm(const at::Tensor& values);
// Elements of `values` that are NaN or infinite.
int64_t CountNonFinite(const at::Tensor& values);

// Row-wise updates of an embedding table [S, E] for the rows a batch
// touched. `ids` [U] are unique (the caller sums duplicates first: an
// index_select backward does), `grads` [U, E] their gradients.
//   adagrad    (row-wise) acc[r] += mean(g_r^2); row -= lr g_r / (sqrt(acc[r]) + eps)
//   lazy_adam  Adam on the touched rows only, bias-corrected with the global step
class SparseOptimizer {
 public:
  enum class Kind { kRowWiseAdagrad, kLazyAdam };
  struct Options {
    Kind kind = Kind::kRowWiseAdagrad;
    double eps = 1e-8, beta1 = 0.9, beta2 = 0.999, initial_accumulator = 0.0;
  };
  // The state lives on the table's device. On the CPU the update is one
  // loop over the touched rows; on CUDA it is gathered, updated and
  // scattered back with tensor ops (StepRows), no host round trip.
  SparseOptimizer(const at::Tensor& table, const Options& options);

  void Step(at::Tensor& table, const at::Tensor& ids, const at::Tensor& grads, double lr);
  // The same update with tensor ops on any device (what Step runs on CUDA);
  // public so the CPU tests check it against the loop.
  void StepRows(at::Tensor& table, const at::Tensor& ids, const at::Tensor& grads, double lr);
  // The live state tensors ({acc} or {m, v}); see DenseOptimizer::state().
  std::vector<at::Tensor> state() const;
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  Options options_;
  int64_t steps_ = 0;
  at::Tensor acc_;    // adagrad [S]
  at::Tensor m_, v_;  // lazy adam [S, E]
};

}  // namespace topspin
