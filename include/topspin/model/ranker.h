// The search ranker: one score per product from dense features and hashed
// categorical ids, on jagged batches (every real product scored once).
//
//   dense  [N, F] float32 -> bottom MLP (ReLU) -> d [N, b]
//   sparse [N, C] int64   -> C embedding tables [S_c, E] -> e_c [N, E]
//   x0 = concat(d, e_1, ..., e_C) [N, D],  D = b + C * E
//   interaction: concat (x = x0), or DCN-v2 cross layers
//                x_{l+1} = x0 * (W_l x_l + b_l) + x_l
//   top MLP (ReLU) -> Linear(., 1) -> scores [N]
//
// Embedding tables are not module parameters: they stay outside the flat
// buffer and get sparse row-wise updates. Each forward gathers, per table,
// the unique ids of the batch and their rows as a leaf tensor that requires
// grad; after backward, rows[c].grad() is [U_c, E] with duplicate ids
// already summed (the gather's backward adds them), ready for
// SparseOptimizer. The dense module's parameters go into FlatParams.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace topspin {

enum class Interaction { kConcat, kDcn };
// "concat" or "dcn"; Error{kConfig} naming model.interaction otherwise.
Interaction ParseInteraction(std::string_view name);

struct RankerOptions {
  int64_t dense_dim = 0;                 // F
  std::vector<int64_t> table_sizes;      // S_c, one per sparse feature (C of them)
  int64_t embedding_dim = 16;            // E
  std::vector<int64_t> bottom = {64};    // bottom MLP widths (empty: dense features as they are)
  std::vector<int64_t> top = {128, 64};  // top MLP widths before the final Linear(., 1)
  Interaction interaction = Interaction::kConcat;
  int cross_layers = 2;  // DCN-v2 only
  uint64_t seed = 0;     // initialisation
  // float32 on the CPU (not under autocast): the embedding gather and
  // concatenation as one autograd node (ids made unique by one sort, rows
  // copied straight into x0), and each MLP as one node (GEMMs, and the
  // bias, ReLU and their gradients in loops of its own). false: the
  // modules and the per-table unique / index_select / cat path every
  // device uses, the reference the fused path is tested against.
  bool cpu_fused = true;
};

// Elements of the dense parameters a Ranker of `options` has (the MLPs and
// cross layers), without building it: for memory checks before allocating.
// Embedding tables add table_sizes[c] * embedding_dim each.
int64_t RankerDenseParameters(const RankerOptions& options);

class Ranker {
 public:
  explicit Ranker(const RankerOptions& options);
  ~Ranker();
  Ranker(const Ranker&) = delete;
  Ranker& operator=(const Ranker&) = delete;

  struct Output {
    at::Tensor scores;                   // [N]
    std::vector<at::Tensor> unique_ids;  // per table [U_c] int64
    std::vector<at::Tensor> rows;        // per table [U_c, E], leaves (grad after backward)
  };
  // train: rows require grad (for the sparse update); eval: no autograd.
  Output Forward(const at::Tensor& dense, const at::Tensor& sparse, bool train) const;

  // Each table's unique ids in a batch (ascending) and every document's
  // index into them, as at::_unique2 would give them. On CUDA, _unique2
  // reads its output's size back, waiting for the GPU once per table and
  // step; HostUniques computes them on the host from the host batch, and
  // the device path takes them with the batch's other tensors instead.
  struct Uniques {
    at::Tensor ids;               // [sum of counts] int64, table after table
    at::Tensor inverse;           // [C, N] int64
    std::vector<int64_t> counts;  // per table: its unique ids
  };
  // sparse: the host batch's [n, C] ids; `pinned` allocates the tensors in
  // page-locked memory (for non-blocking copies to a GPU). Throws
  // InternalError for an id outside its table, as the gather would.
  Uniques HostUniques(const int64_t* sparse, int64_t n, bool pinned) const;
  // Forward with `uniques` (on the device of `sparse`) instead of _unique2
  // on the device path; the CPU's fused gather computes its own.
  Output Forward(const at::Tensor& dense, const at::Tensor& sparse, bool train,
                 const Uniques& uniques) const;

  // Moves the dense module and the tables to `device` (before FlatParams
  // takes the parameters).
  void To(const c10::Device& device);
  torch::nn::Module& dense_module();
  std::vector<at::Tensor>& tables();
  const std::vector<at::Tensor>& tables() const;
  const RankerOptions& options() const;
  // Forward multiply-adds x 2 per document (embedding gathers not counted);
  // training is about 3x this.
  int64_t ForwardFlopsPerDoc() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
