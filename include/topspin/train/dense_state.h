// The dense half of any model's training state (DESIGN "Flat buffers"):
// parameters and gradients, the dense optimizer, the gradient exchange and
// its sharding, the same for every Task.
//
//   dist.zero 0  FlatParams: every parameter views one flat buffer [P], its
//                gradient one flat gradient; with several ranks GradBuckets
//                all-reduces slices of it during backward.
//   dist.zero 1  and each rank keeps the optimizer state of its shard
//                (ShardRange), updates that shard and all-gathers the rest.
//   dist.zero 2  and only its shard of the summed gradient (reduce-scatter).
//   dist.zero 3  Zero3: the parameters too live as shards, gathered unit by
//                unit just in time (the Task brackets its units).
//
// One step, in the trainer's order: Arm() before the last micro-batch's
// backward, Finish() once backward is done (waits for the exchange),
// Step(lr, grad_scale) over grads() (the division by the loss terms and
// the clipping folded into grad_scale), which leaves every gradient zero;
// ZeroGrad() instead for a step that is skipped.
//
// Checkpoints hold the whole state whatever the stage: Gather() is a
// collective that returns every tensor whole under its checkpoint name
// (dense.<parameter name>, dense.opt<i>: the optimizer state as one flat
// [P] tensor in parameter order), and Load() takes this rank's part from a
// checkpoint written at any world size and stage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/train/flat_params.h"

namespace torch::nn {
class Module;
}

namespace topspin {

class Comm;
class SafetensorsFile;

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class DenseState {
 public:
  struct Options {
    int zero = 0;  // dist.zero; used only with several ranks
    DenseOptimizer::Options optimizer;
    int64_t bucket_bytes = int64_t{25} << 20;  // dist.bucket_mib
    bool overlap = true;                        // dist.overlap
  };
  // Every parameter of the module becomes dense state (named_parameters order).
  // `units` (dist.zero 3): the same parameters in the model's ZeRO-3 units.
  // `comm`: null for one process (zero is then 0).
  DenseState(torch::nn::Module& module, Comm* comm, const Options& options,
             const std::vector<std::vector<at::Tensor>>& units = {});
  ~DenseState();
  DenseState(const DenseState&) = delete;
  DenseState& operator=(const DenseState&) = delete;

  int zero() const { return zero_; }
  int64_t numel() const;  // P

  // ZeRO-3's brackets around each use of unit u (null below stage 3).
  class Zero3* zero3() const { return zero3_.get(); }

  void Arm();
  void Finish();
  // This rank's part of the summed gradient: the flat gradient [P], or its
  // shard (dist.zero >= 2, where the squares for the global norm must be
  // summed over ranks).
  at::Tensor grads() const;
  bool sharded_grads() const { return zero_ >= 2; }
  // The optimizer step over grad_scale * grads() at learning rate lr;
  // then the updated shards all-gathered (dist.zero 1 and 2). Every
  // gradient is zero afterwards.
  void Step(double lr, double grad_scale = 1.0);
  void ZeroGrad();
  int64_t optimizer_steps() const;
  void set_optimizer_steps(int64_t steps);

  // This rank's bytes: optimizer state, gradient storage, and the most
  // bytes of staging (ZeRO-2 buckets in flight, ZeRO-3 gathered units).
  int64_t param_bytes() const;
  int64_t optimizer_bytes() const;
  int64_t grad_bytes() const;
  int64_t staging_peak_bytes() const;
  // Estimated memory traffic of one update: the buffers streamed 8 times
  // (gradient read and zeroed, parameters and two moments read and written).
  double StepBytes() const { return 8.0 * 4 * double(numel()); }

  // Every tensor of the dense state, whole, on the host (a collective).
  NamedTensors Gather();
  // This rank's part of a checkpoint's dense state (shape and dtype of
  // every tensor checked: Error{kData} naming it).
  void Load(const SafetensorsFile& file);
  // The parameters only (--init-from, inference).
  void LoadParameters(const SafetensorsFile& file);

 private:
  struct Slot {
    std::string name;  // dense.<module name>
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;  // in the flat [P] of parameter order
    int64_t unit_offset = 0;        // ZeRO-3: in Zero3's whole tensor (unit order)
  };
  NamedTensors LiveParameters(const SafetensorsFile* reading);
  // ZeRO-3: a whole tensor in unit order to parameter order, and back.
  at::Tensor ToParameterOrder(const at::Tensor& unit_order) const;
  at::Tensor ToUnitOrder(const at::Tensor& parameter_order) const;
  // ZeRO-1/2: every rank's shard of a flat tensor (parameters or optimizer
  // state), gathered in rank order.
  std::vector<at::Tensor> GatherShards(const at::Tensor& shard) const;

  Comm* comm_ = nullptr;
  int zero_ = 0;
  std::vector<Slot> slots_;
  std::unique_ptr<FlatParams> flat_;      // stages 0-2
  std::unique_ptr<class Zero3> zero3_;    // stage 3
  std::unique_ptr<class GradBuckets> buckets_;
  std::unique_ptr<DenseOptimizer> optimizer_;
  int64_t shard_offset_ = 0, shard_numel_ = 0;  // this rank's optimizer shard (stages 1-2)
  std::vector<int64_t> shard_rows_;             // every rank's shard_numel_ (stages 1-2)
};

}  // namespace topspin
