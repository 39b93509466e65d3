#include "topspin/ddp/grad_sync.h"

#include <chrono>

#include <fmt/format.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "ddp/grad_hooks.h"
#include "topspin/core/error.h"

namespace topspin {

std::pair<int64_t, int64_t> ShardRange(int64_t total, int world, int rank, int64_t align) {
  const int64_t per = ((total + world - 1) / world + align - 1) / align * align;
  const int64_t offset = std::min(total, per * rank);
  return {offset, std::min(per, total - offset)};
}

std::shared_ptr<torch::autograd::Node> OnGradAccumulated(const at::Tensor& param,
                                                         std::function<void()> on_ready,
                                                         const char* who) {
  auto acc = torch::autograd::impl::grad_accumulator(param);
  if (!acc) {
    throw InternalError(fmt::format("{}: a parameter is not a leaf that requires grad", who));
  }
  acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [on_ready = std::move(on_ready)](const torch::autograd::variable_list& outputs,
                                       const torch::autograd::variable_list&) {
        on_ready();
        return outputs;
      }));
  return acc;
}

struct GradBuckets::Impl {
  Comm& comm;
  at::Tensor grads;
  Options options;
  std::vector<at::Tensor> params;
  std::vector<std::pair<int64_t, int64_t>> slots;
  std::vector<std::pair<int64_t, int64_t>> buckets;  // [offset, numel)
  std::vector<int> bucket_of;                         // parameter -> bucket
  std::vector<std::vector<size_t>> members;           // bucket -> parameters
  std::vector<int> ready;                             // parameters ready this backward
  std::vector<std::vector<CommWork>> work;            // bucket -> its collectives
  size_t next_launch = 0;
  bool armed = false;
  // The graph holds accumulators weakly: these keep them (and the hooks).
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  // shard_grads (ZeRO-2)
  std::pair<int64_t, int64_t> shard;  // this rank's [offset, numel)
  at::Tensor shard_grads;
  std::vector<at::Tensor> staging;  // bucket -> its gradients, while in flight
  size_t next_harvest = 0;
  int64_t staging_bytes = 0, peak_staging_bytes = 0;
  int live_staging = 0;  // staging buffers allocated and not yet harvested
  size_t reducing = 0;   // buckets whose reduces have started, in order
  int64_t flat_numel = 0;  // the flat gradient's length

  Impl(Comm& c, at::Tensor g, Options o) : comm(c), grads(std::move(g)), options(o) {}

  // Moves parameter k's accumulated gradient into its bucket's staging
  // buffer and frees it.
  void Stage(size_t k) {
    auto& grad = params[k].mutable_grad();
    if (!grad.defined()) return;  // not used by this backward: stays zero
    const int b = bucket_of[k];
    Allocate(b);
    staging[b].narrow(0, slots[k].first - buckets[b].first, slots[k].second).copy_(grad.reshape({-1}));
    grad.reset();
  }

  // Gives bucket b its staging buffer. At most options.max_staged buffers
  // live at once: first wait for the oldest reduces in flight.
  void Allocate(size_t b) {
    if (staging[b].defined()) return;
    while (live_staging >= options.max_staged && next_harvest < reducing) {
      Harvest(next_harvest++);
    }
    staging[b] = torch::zeros({buckets[b].second}, shard_grads.options());
    ++live_staging;
    staging_bytes += buckets[b].second * int64_t(sizeof(float));
    peak_staging_bytes = std::max(peak_staging_bytes, staging_bytes);
  }

  void Launch(size_t b) {
    const auto [offset, numel] = buckets[b];
    if (!options.shard_grads) {
      work[b].push_back(comm.AllReduceSumAsync(grads.narrow(0, offset, numel)));
      return;
    }
    for (size_t k : members[b]) Stage(k);
    Allocate(b);  // when no parameter of the bucket had a gradient
    // One reduce-scatter with uneven pieces: each rank receives the sum of
    // the part of the bucket its shard covers (empty for the others),
    // straight into its shard of the gradient.
    std::vector<at::Tensor> pieces;
    at::Tensor mine;
    for (int r = 0; r < comm.world_size(); ++r) {
      const auto [so, sn] = ShardRange(flat_numel, comm.world_size(), r);
      const int64_t lo = std::clamp(so, offset, offset + numel);
      const int64_t hi = std::clamp(so + sn, lo, offset + numel);
      pieces.push_back(staging[b].narrow(0, lo - offset, hi - lo));
      if (r == comm.rank()) mine = shard_grads.narrow(0, hi > lo ? lo - so : 0, hi - lo);
    }
    work[b].push_back(comm.ReduceScatterSumAsync(std::move(pieces), mine));
    reducing = b + 1;
    // Frees the staging of earlier buckets whose reduces are done.
    while (next_harvest < b && Done(next_harvest)) Harvest(next_harvest++);
  }

  bool Done(size_t b) const {
    for (const auto& w : work[b]) {
      if (!w.Ready()) return false;
    }
    return true;
  }

  // Waits for bucket b; with shard_grads frees its staging buffer.
  void Harvest(size_t b) {
    for (auto& w : work[b]) w.Wait();
    work[b].clear();
    if (!options.shard_grads) return;
    const int64_t numel = buckets[b].second;
    staging[b] = at::Tensor();  // the reduce-scatter wrote this rank's piece into shard_grads
    --live_staging;
    staging_bytes -= numel * int64_t(sizeof(float));
  }

  int64_t FlatNumel() const {
    int64_t total = 0;
    for (const auto& [offset, numel] : slots) total = std::max(total, offset + numel);
    return total;
  }

  void OnReady(size_t param) {
    if (!armed || !options.overlap) return;
    if (options.shard_grads) {
      // Frees what has been reduced before staging more.
      while (next_harvest < reducing && Done(next_harvest)) Harvest(next_harvest++);
      Stage(param);
    }
    const int b = bucket_of[param];
    if (++ready[b] != int(members[b].size())) return;
    while (next_launch < buckets.size() && ready[next_launch] == int(members[next_launch].size())) {
      Launch(next_launch++);
    }
  }
};

GradBuckets::GradBuckets(Comm& comm, const std::vector<at::Tensor>& params,
                         const std::vector<std::pair<int64_t, int64_t>>& slots, at::Tensor grads,
                         Options options)
    : impl_(std::make_unique<Impl>(comm, std::move(grads), options)) {
  if (params.size() != slots.size()) throw InternalError("GradBuckets: params and slots differ");
  const int64_t per_bucket = std::max<int64_t>(1, options.bucket_bytes / int64_t(sizeof(float)));
  auto& im = *impl_;
  im.params = params;
  im.slots = slots;
  im.bucket_of.assign(params.size(), 0);
  // Reverse parameter order: bucket 0 holds the last parameters.
  int64_t end = -1, begin = -1;
  for (size_t k = params.size(); k-- > 0;) {
    const auto [offset, numel] = slots[k];
    if (end < 0) end = offset + numel;
    begin = offset;
    im.bucket_of[k] = static_cast<int>(im.buckets.size());
    const bool full = end - begin >= per_bucket;
    if (full || k == 0) {
      im.buckets.emplace_back(begin, end - begin);
      end = -1;
    }
  }
  im.members.resize(im.buckets.size());
  for (size_t k = 0; k < params.size(); ++k) im.members[im.bucket_of[k]].push_back(k);
  im.ready.assign(im.buckets.size(), 0);
  im.work.resize(im.buckets.size());
  im.staging.resize(im.buckets.size());
  if (options.shard_grads) {
    im.flat_numel = im.FlatNumel();
    im.shard = ShardRange(im.flat_numel, comm.world_size(), comm.rank());
    im.shard_grads = torch::zeros({im.shard.second}, params.at(0).options());
  }
  for (size_t k = 0; k < params.size(); ++k) {
    Impl* self = impl_.get();
    im.accumulators.push_back(
        OnGradAccumulated(params[k], [self, k] { self->OnReady(k); }, "GradBuckets"));
  }
}

GradBuckets::~GradBuckets() = default;

void GradBuckets::Arm() {
  std::fill(impl_->ready.begin(), impl_->ready.end(), 0);
  impl_->next_launch = 0;
  impl_->next_harvest = 0;
  impl_->reducing = 0;
  impl_->armed = true;
}

double GradBuckets::Finish() {
  auto& im = *impl_;
  const auto start = std::chrono::steady_clock::now();
  while (im.next_launch < im.buckets.size()) im.Launch(im.next_launch++);
  while (im.next_harvest < im.buckets.size()) im.Harvest(im.next_harvest++);
  im.armed = false;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t GradBuckets::num_buckets() const { return impl_->buckets.size(); }
std::pair<int64_t, int64_t> GradBuckets::bucket(size_t b) const { return impl_->buckets.at(b); }
const at::Tensor& GradBuckets::shard_grads() const { return impl_->shard_grads; }
int64_t GradBuckets::peak_staging_bytes() const { return impl_->peak_staging_bytes; }

RowGrads CoalesceRows(const at::Tensor& ids, const at::Tensor& grads) {
  const auto [unique, inverse, counts] = at::_unique2(ids, /*sorted=*/true,
                                                      /*return_inverse=*/true,
                                                      /*return_counts=*/false);
  auto summed = torch::zeros({unique.size(0), grads.size(1)}, grads.options());
  summed.index_add_(0, inverse, grads);
  return {unique, summed};
}

namespace {

// Rows of several tables as one float32 tensor [U, D + 2]: columns 0-1 hold
// the bits of the int64 global id (table offset + id), the rest the
// gradient. One all-gather then moves every table.
at::Tensor PackRows(const std::vector<RowGrads>& local, const std::vector<size_t>& tables,
                    const std::vector<int64_t>& offsets, int64_t d) {
  std::vector<at::Tensor> parts;
  for (size_t c : tables) {
    const int64_t u = local[c].ids.size(0);
    auto part = torch::empty({u, d + 2}, local[c].grads.options());
    const auto gid = (local[c].ids + offsets[c]).contiguous();
    part.narrow(1, 0, 2).copy_(gid.view(torch::kFloat).view({u, 2}));
    part.narrow(1, 2, d).copy_(local[c].grads);
    parts.push_back(part);
  }
  return parts.empty() ? torch::empty({0, d + 2}, local[tables[0]].grads.options())
                       : torch::cat(parts);
}

}  // namespace

namespace {

// Tables exchanged densely: no bigger than the rows all ranks could touch.
bool Dense(int64_t table_rows, int world, int64_t docs_per_rank) {
  return table_rows <= world * docs_per_rank;
}

}  // namespace

int64_t SparseRowCount(const std::vector<int64_t>& unique_rows,
                       const std::vector<int64_t>& table_rows, int world, int64_t docs_per_rank) {
  int64_t rows = 0;
  for (size_t c = 0; c < unique_rows.size(); ++c) {
    if (!Dense(table_rows[c], world, docs_per_rank)) rows += unique_rows[c];
  }
  return rows;
}

std::vector<RowGrads> SyncRows(Comm& comm, const std::vector<RowGrads>& local,
                               const std::vector<int64_t>& table_rows, int64_t docs_per_rank,
                               const std::vector<int64_t>* sparse_rows,
                               const std::function<void()>& in_flight) {
  std::vector<RowGrads> out(local.size());
  if (local.empty()) {
    if (in_flight) in_flight();
    return out;
  }
  const int64_t d = local[0].grads.size(1);
  std::vector<size_t> dense, sparse;
  std::vector<int64_t> offsets(local.size());
  int64_t dense_numel = 0, sparse_ids = 0;  // sparse tables' ids follow each other
  for (size_t c = 0; c < local.size(); ++c) {
    if (local[c].grads.size(1) != d) throw InternalError("SyncRows: tables of different widths");
    if (Dense(table_rows[c], comm.world_size(), docs_per_rank)) {
      offsets[c] = dense_numel;
      dense_numel += table_rows[c] * (d + 1);
      dense.push_back(c);
    } else {
      offsets[c] = sparse_ids;
      sparse_ids += table_rows[c];
      sparse.push_back(c);
    }
  }
  // Small tables: one all-reduce of [rows, D + 1] per table laid end to end
  // (gradient sums and, in the last column, touch counts); it runs while
  // the large tables' rows are gathered.
  at::Tensor summed;
  CommWork work;
  if (!dense.empty()) {
    summed = torch::zeros({dense_numel}, local[0].grads.options());
    for (size_t c : dense) {
      auto table = summed.narrow(0, offsets[c], table_rows[c] * (d + 1)).view({table_rows[c], d + 1});
      table.narrow(1, 0, d).index_add_(0, local[c].ids, local[c].grads);
      table.select(1, d).index_fill_(0, local[c].ids, 1.0f);
    }
    work = comm.AllReduceSumAsync(summed);
  }
  std::vector<at::Tensor> parts;
  CommWork gather;
  if (!sparse.empty()) {
    const at::Tensor packed = PackRows(local, sparse, offsets, d);
    if (sparse_rows != nullptr) {
      gather = comm.AllGatherRowsAsync(packed, *sparse_rows, parts);
    } else {
      parts = comm.AllGatherRows(packed);
    }
  }
  if (in_flight) in_flight();
  if (!sparse.empty()) {
    gather.Wait();
    const auto gathered = torch::cat(parts);
    const int64_t n = gathered.size(0);
    const auto gid = gathered.narrow(1, 0, 2).contiguous().view(torch::kLong).view({n});
    const auto grads = gathered.narrow(1, 2, d);
    for (size_t c : sparse) {
      const auto mine = ((gid >= offsets[c]) & (gid < offsets[c] + table_rows[c])).nonzero().flatten();
      out[c] = CoalesceRows(gid.index_select(0, mine) - offsets[c], grads.index_select(0, mine));
    }
  }
  if (!dense.empty()) {
    work.Wait();
    for (size_t c : dense) {
      const auto table =
          summed.narrow(0, offsets[c], table_rows[c] * (d + 1)).view({table_rows[c], d + 1});
      const auto ids = table.select(1, d).nonzero().flatten();
      out[c] = {ids, table.narrow(1, 0, d).index_select(0, ids)};
    }
  }
  return out;
}

}  // namespace topspin
