// The process group of a data-parallel job: rendezvous and the collectives
// the trainer uses, over c10d. Host tensors travel over ProcessGroupGloo;
// CUDA tensors over ProcessGroupNCCL when the rank computes on a GPU
// (CommOptions::cuda_device >= 0 and backend auto or nccl). Each collective
// picks the group by its tensor's device, so the trainer's small host-side
// totals and its device-side gradients share one Comm.
//
// Rendezvous (Comm::Connect):
//   - one host, launched by `topspin train --nproc N`: a FileStore at
//     CommOptions::file_store (inside the run directory, in a 0700
//     directory: no open port);
//   - otherwise a TCPStore at the launch environment's master address and
//     port, served by rank 0 (or by torchrun's agent when
//     TORCHELASTIC_USE_AGENT_STORE is "True").
//   Across hosts every rank proves the job token (CommOptions::token): rank
//   0 checks each rank's proof, a rank with the wrong token is refused and
//   every rank fails with Error{kDist} naming it.
//
// Every store and collective operation times out after CommOptions::timeout
// (Error{kDist} naming the operation). Thread-safety: one thread issues
// collectives, in the same order on every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/dist/launch_env.h"
#include "topspin/dist/rendezvous.h"

namespace topspin {

using CommOptions = RendezvousOptions;

// The NCCL LibTorch was built with, e.g. "2.28.9"; "" without NCCL.
std::string NcclVersion();

// An in-flight collective. Wait() blocks until it completes (Error{kDist}
// on failure or timeout); destroying an unwaited Work waits.
class CommWork {
 public:
  CommWork();
  ~CommWork();
  CommWork(CommWork&&) noexcept;
  CommWork& operator=(CommWork&&) noexcept;
  void Wait();
  bool pending() const;
  // True once the collective has completed (or was waited for): Wait()
  // would not block.
  bool Ready() const;

 private:
  friend struct CommWorkStart;  // comm.cc
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Comm {
 public:
  // Joins the job described by `env` (world_size > 1). Blocks until every
  // rank has joined or the timeout passes.
  static std::unique_ptr<Comm> Connect(const LaunchEnv& env, const CommOptions& options);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const;
  int world_size() const;
  // "gloo" or "nccl": the group that carries this rank's CUDA tensors
  // ("gloo" also when the rank computes on the CPU).
  const char* device_backend() const;
  // Seconds this rank has spent blocked waiting for collectives (waits and
  // synchronous collectives): what the profiler calls sync.
  double blocked_seconds() const;

  // Sums `t` (contiguous, host or this rank's CUDA device) over ranks in
  // place; every rank gets the same bits. Started now, finished by Wait()
  // (for a CUDA tensor Wait() orders the current stream after it).
  CommWork AllReduceSumAsync(at::Tensor t);
  void AllReduceSum(at::Tensor t) { AllReduceSumAsync(std::move(t)).Wait(); }
  // Reduce-scatter: pieces[r] (world tensors, contiguous, the same dtype
  // and device; sizes may differ between r, even be 0) is summed over ranks
  // into rank r's `out` (pieces[rank()]'s shape). ZeRO-2 and ZeRO-3.
  CommWork ReduceScatterSumAsync(std::vector<at::Tensor> pieces, at::Tensor out);
  // Every rank's `t` in rank order. Sizes along dim 0 may differ between
  // ranks (other dims and dtype must agree): rows are exchanged padded to
  // the largest, then trimmed.
  std::vector<at::Tensor> AllGatherRows(const at::Tensor& t);
  // The same when every rank's row count is known (rows[r]): one
  // collective, started now. out[r] views rank r's rows, valid after Wait().
  CommWork AllGatherRowsAsync(const at::Tensor& t, const std::vector<int64_t>& rows,
                              std::vector<at::Tensor>& out);
  // Every rank's `piece` (the same shape on all ranks) into out[r], in
  // place: out may be views of one buffer (ZeRO-3's gathered unit).
  void AllGatherInto(const at::Tensor& piece, const std::vector<at::Tensor>& out);
  // Copies root's `t` into every rank's `t`.
  void Broadcast(at::Tensor t, int root = 0);
  void Barrier();

  // Store access for small strings (the run directory rank 0 created).
  void SetString(const std::string& key, const std::string& value);
  std::string GetString(const std::string& key);  // waits for the key

 private:
  struct Impl;
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
