// Gradient synchronisation for data parallel training (DESIGN "Flat
// buffers"): dense gradients in buckets overlapped with backward, embedding
// rows exchanged sparsely.
//
// GradBuckets splits the flat gradient buffer [P] into contiguous buckets of
// about `bucket_bytes`, cut at parameter boundaries, in reverse parameter
// order (backward produces the last layers' gradients first). An autograd
// hook on each parameter's gradient accumulator counts the parameters of
// its bucket; when a bucket is complete its all-reduce (sum) is launched
// asynchronously while backward goes on. Buckets are launched strictly in
// bucket order, so every rank issues the same collectives in the same
// order. Finish() launches what is left, waits for all of it and returns
// the seconds it blocked: the sync time backward did not hide.
//
// With Options::shard_grads (ZeRO-2) the parameters' gradients are not
// views of a flat buffer: the hook copies each gradient into its bucket's
// staging buffer as soon as it is accumulated and frees it, a complete
// bucket is reduce-scattered (one reduce per rank whose shard it overlaps,
// to that rank), and each rank keeps only its shard of the summed flat
// gradient (ShardRange) in shard_grads(). A staging buffer lives from its
// bucket's first gradient until its reduce is done, and at most
// Options::max_staged live at once, so the gradient memory is the shard
// plus at most that many buckets (peak_staging_bytes()).
//
// SyncRows sums the gradients of embedding rows over ranks. Large tables
// exchange only the touched rows (all-gather of ids and rows, then a sum in
// rank order, so every rank gets the same bits); tables whose dense
// gradient is no bigger than the gathered rows could be ([rows, dim] <=
// world x docs_per_rank x dim) are all-reduced densely instead. The choice
// depends only on shapes, so every rank makes the same one.
//
// Not thread-safe; one GradBuckets per flat buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/ddp/comm.h"

namespace topspin {

class GradBuckets {
 public:
  struct Options {
    int64_t bucket_bytes = int64_t{25} << 20;
    bool overlap = true;  // false: all-reduce every bucket in Finish(), after backward
    bool shard_grads = false;  // ZeRO-2 (see above); `grads` is then unused
    // ZeRO-2: the most staging buffers alive at once; a bucket that needs
    // one more waits for the oldest reduces in flight. >= 1.
    int max_staged = 2;
  };
  // params[i] is a leaf whose gradient is grads.narrow(0, slots[i].first,
  // slots[i].second); `grads` [P] float32 is the flat gradient buffer.
  // With shard_grads, params[i] fills [slots[i].first, + second) of a flat
  // gradient that exists only as shards.
  GradBuckets(Comm& comm, const std::vector<at::Tensor>& params,
              const std::vector<std::pair<int64_t, int64_t>>& slots, at::Tensor grads,
              Options options);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Arms the hooks for the next backward (the last micro-batch of a step);
  // backward passes while disarmed only accumulate.
  void Arm();
  // Launches the buckets not yet launched, waits for all; returns the
  // seconds spent waiting. Disarms.
  double Finish();

  size_t num_buckets() const;
  // [offset, offset + numel) of bucket b in the flat buffer.
  std::pair<int64_t, int64_t> bucket(size_t b) const;

  // shard_grads only: this rank's shard of the summed flat gradient, valid
  // after Finish() until the next backward's hooks fire.
  const at::Tensor& shard_grads() const;
  // shard_grads only: the most bytes of staging buffers alive at once.
  int64_t peak_staging_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// This rank's shard [offset, offset + numel) of a flat buffer of `total`
// elements split over `world` ranks: equal contiguous pieces of
// ceil(total / world) rounded up to a multiple of `align`, the last shorter
// (or empty).
std::pair<int64_t, int64_t> ShardRange(int64_t total, int world, int rank, int64_t align = 1);

// Touched embedding rows of one table: ids [U] int64 (unique) and their
// gradients [U, D] float32.
struct RowGrads {
  at::Tensor ids, grads;
};

// Sums each table's row gradients over ranks (see above). `table_rows[c]`
// is table c's row count, `docs_per_rank` the most documents a rank's
// batch holds. Returns, per table, the rows touched on any rank with their
// summed gradients, ids ascending; identical on every rank.
//
// `sparse_rows`, when given, holds every rank's SparseRowCount(): the
// gather then needs no exchange of sizes first (the trainer sums the counts
// into the step's totals, which travel during backward). `in_flight`, when
// given, runs while the row collectives are on the wire (the trainer waits
// for its gradient buckets there).
std::vector<RowGrads> SyncRows(Comm& comm, const std::vector<RowGrads>& local,
                               const std::vector<int64_t>& table_rows, int64_t docs_per_rank,
                               const std::vector<int64_t>* sparse_rows = nullptr,
                               const std::function<void()>& in_flight = {});

// The rows this rank puts into SyncRows' all-gather: the touched rows
// (unique_rows[c] of table c) of the tables exchanged sparsely.
int64_t SparseRowCount(const std::vector<int64_t>& unique_rows,
                       const std::vector<int64_t>& table_rows, int world, int64_t docs_per_rank);

// Sums `rows` by id: unique ids ascending, gradients of equal ids added in
// input order (deterministic).
RowGrads CoalesceRows(const at::Tensor& ids, const at::Tensor& grads);

}  // namespace topspin
