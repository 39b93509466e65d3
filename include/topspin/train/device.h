// Where a training process computes (train.device) and the host side of the
// CUDA path: page-locked batch buffers, and batch buffers that return to
// their pool only once the host-to-device copy reading them has completed.
//
// Torch-free: the CLI and the tests include it without LibTorch headers.
// The copies themselves (a dedicated stream, events) are in
// src/train/batch_copier.h.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "topspin/pipeline/batch.h"

namespace topspin {

struct ComputeDevice {
  bool cuda = false;
  int index = -1;            // the CUDA device ordinal; -1 on the CPU
  std::string Name() const;  // "cpu" or "cuda:N"
};

// train.device: "cpu"; "cuda" (Error{kConfig} naming train.device when no
// GPU is visible); "auto": CUDA when a GPU is visible, else the CPU. Rank
// `local_rank` of a host takes GPU local_rank % visible_gpus.
ComputeDevice ResolveDevice(const std::string& setting, int visible_gpus, int local_rank);

// Makes `device` the current CUDA device of this thread (a no-op on the
// CPU): streams, events and allocations without an explicit index use it.
void UseDevice(const ComputeDevice& device);

// train.tf32: float32 matmuls and convolutions on TF32 tensor cores
// (Ampere and newer; 10 mantissa bits in the products, fp32 accumulation),
// process-wide. A no-op on the CPU, which has no TF32.
void AllowTf32(const ComputeDevice& device, bool on);

// CUDA devices this process can use: 0 on a machine without a GPU (or a
// LibTorch built without CUDA).
int VisibleGpus();

// Page-locked host memory from LibTorch's CUDA caching host allocator, so
// copies from it run asynchronously (non_blocking) and at full PCIe/NVLink
// speed. Needs a visible GPU: Error{kConfig} otherwise.
std::shared_ptr<BufferAllocator> PinnedAllocator();

// Items held until their completion test passes, released (destroyed) in
// the order they came. The batch copier parks each host batch here with
// "its copy's event has completed", so the pool never hands a buffer to a
// loader thread while a copy still reads it. Not thread-safe.
template <typename T>
class ReleaseQueue {
 public:
  // `done` must not block; `wait` blocks until done() would be true.
  void Push(T item, std::function<bool()> done, std::function<void()> wait) {
    entries_.push_back({std::move(item), std::move(done), std::move(wait)});
  }
  // Releases the leading items whose test passes; returns how many are held.
  size_t Poll() {
    while (!entries_.empty() && entries_.front().done()) entries_.pop_front();
    return entries_.size();
  }
  // Waits for every item and releases them all.
  void Drain() {
    while (!entries_.empty()) {
      entries_.front().wait();
      entries_.pop_front();
    }
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    T item;
    std::function<bool()> done;
    std::function<void()> wait;
  };
  std::deque<Entry> entries_;
};

// The peaks MFU, the roofline and the benchmarks' compute floor are
// measured against (one probe for all of them): dense matmul FLOP/s in the
// precision the run computes in (bf16, or fp32 with TF32 off), on the
// CPU's LibTorch threads (1024^3) or the GPU (4096^3); and the memory
// bandwidth (read + write bytes per second) of a 64 MiB copy.
double MeasureMatmulPeak(const ComputeDevice& device, bool bf16);
double MeasureCopyBandwidth(const ComputeDevice& device);

// Waits until the device has run everything queued on it (a no-op on the
// CPU): around a timed window of device work.
void SynchronizeDevice(const ComputeDevice& device);

}  // namespace topspin
