// Ranking batches on the compute device (train.device).
//
// On the CPU, Copy() wraps the pooled host memory in tensors (no copy) and
// the DeviceBatch keeps the BatchPtr, so the buffer returns to its pool
// when the DeviceBatch is destroyed.
//
// On CUDA, Copy() enqueues non_blocking copies of the filled arrays on a
// dedicated copy stream (from pinned memory when the pool's allocator is
// PinnedAllocator()) and records an event after them. The host batch is
// parked in a ReleaseQueue and returns to its pool only once that event
// has completed, so no loader thread refills a buffer a copy still reads.
// Use() makes the compute stream wait for the event on the GPU (no host
// synchronisation), timed as the "h2d" phase: what the copy did not hide.
// The device tensors are recorded on the compute stream, so the caching
// allocator does not reuse them before the step that reads them is done.
// The trainer copies one batch ahead: batch k + 1's copy runs while step k
// computes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "topspin/pipeline/batch.h"
#include "topspin/train/device.h"
#include "train/device_timer.h"

namespace topspin {

// Ranking batches: dense [N, F] float32, sparse [N, C] int64, labels [N]
// float32, offsets [B + 1] int64; language-model batches: tokens
// [B, T + 1] int32. Batch's arrays (those of its kind; the others
// undefined), on the compute device.
struct BatchTensors {
  torch::Tensor dense, sparse, labels, offsets, tokens;
};

struct DeviceBatch {
  BatchTensors t;
  size_t num_docs = 0, num_lists = 0;
  uint64_t epoch = 0, index = 0;  // the batch's place in the order (for resume)
  int64_t ticket = -1;            // CUDA: its copy, for Use()
  BatchPtr host{nullptr, BatchReturn{nullptr}};  // CPU: the memory `t` views; CUDA: empty
  std::vector<torch::Tensor> extra;              // Copy()'s `extra`, on the compute device
};

// Tensors viewing a host batch's arrays (no copy); `b` must outlive them.
BatchTensors WrapHost(Batch& b);

class BatchCopier {
 public:
  explicit BatchCopier(const ComputeDevice& device);
  ~BatchCopier();  // waits for copies in flight
  BatchCopier(const BatchCopier&) = delete;
  BatchCopier& operator=(const BatchCopier&) = delete;

  // `extra`: host tensors a task computed from the batch (the ranker's
  // unique ids), copied with it on the same stream; page-locked ones copy
  // without blocking the host. Kept alive until the copy has completed.
  DeviceBatch Copy(BatchPtr batch, std::vector<torch::Tensor> extra = {});
  // Before the compute stream reads `batch` (CUDA; a no-op on the CPU).
  void Use(DeviceBatch& batch, DeviceTimer& timer);
  // Host batches whose copies are still in flight (after releasing the
  // finished ones).
  size_t InFlight();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
