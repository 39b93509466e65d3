// ZeRO-3: parameters sharded over ranks, gathered per unit just in time.
//
// A model's parameters are split into units (wrapped blocks, e.g. a few
// transformer blocks each; the model decides the granularity). Each unit's
// parameters view one flat buffer of the unit, padded to a multiple of the
// world size and cut into equal pieces: rank r owns piece r of every unit,
// and keeps only its pieces of the parameters, the gradients and (in the
// caller's optimizer) the optimizer state: 16P/N bytes of fp32 AdamW state
// per rank instead of 16P.
//
// The model's forward brackets each use of a unit:
//
//   zero.Gather(u);              // all-gather the unit's pieces: full parameters
//   y = unit_forward(x);
//   y = zero.Release(u, y);      // free them again (reshard after forward),
//                                // and gather them before the unit's backward
//
// A unit's gradients are reduced to the pieces' owners (one reduce per
// piece) as soon as backward has produced all of them, while backward goes
// on; the full gradients and parameters are then freed. Finish() waits for
// the last reduces and leaves shard_grads() holding this rank's pieces of
// the summed gradient. Freeing keeps the unit's storage object and drops its
// memory, so the views autograd saved see the gathered values again when
// the pre-backward hook re-gathers them.
//
// Not thread-safe; one Zero3 per model. Every rank must bracket the same
// units in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/ddp/comm.h"

namespace topspin {

class Zero3 {
 public:
  struct Options {
    bool reshard_after_forward = true;  // false: keep a unit gathered until its backward is done
  };
  // units[u]: the parameters (leaves that require grad) of unit u; every
  // parameter in exactly one unit. Their current values (the same on every
  // rank) become the shards; the parameters then view the unit buffers.
  Zero3(Comm& comm, const std::vector<std::vector<at::Tensor>>& units, Options options);
  ~Zero3();
  Zero3(const Zero3&) = delete;
  Zero3& operator=(const Zero3&) = delete;

  void Gather(size_t unit);
  at::Tensor Release(size_t unit, const at::Tensor& output);
  // Arms the gradient hooks before backward; Finish() launches what is
  // left, waits for it and frees every gathered unit.
  void Arm();
  void Finish();

  // This rank's pieces of every unit, concatenated in unit order.
  at::Tensor& shard_params();
  const at::Tensor& shard_grads() const;
  int64_t numel() const;  // P: the parameters, unpadded
  // Checkpoints: a tensor laid out like shard_params() (this rank's pieces,
  // e.g. an optimizer moment) gathered from every rank into the whole flat
  // tensor of the parameters in unit order, unpadded [numel()] (a
  // collective); and this rank's pieces of such a whole tensor.
  at::Tensor Unshard(const at::Tensor& pieces);
  at::Tensor ShardOf(const at::Tensor& whole) const;
  // Where each unit's parameters start in that whole tensor.
  std::vector<int64_t> unit_offsets() const;
  // Bytes of full unit parameters gathered now, and the most at once.
  int64_t gathered_bytes() const;
  int64_t peak_gathered_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
