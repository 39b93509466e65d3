#include "topspin/ddp/grad_sync.h"

#include <chrono>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {

struct GradBuckets::Impl {
  Comm& comm;
  at::Tensor grads;
  Options options;
  std::vector<std::pair<int64_t, int64_t>> buckets;  // [offset, numel)
  std::vector<int> bucket_of;                         // parameter -> bucket
  std::vector<int> size;                              // parameters per bucket
  std::vector<int> ready;                             // parameters ready this backward
  std::vector<CommWork> work;
  size_t next_launch = 0;
  bool armed = false;
  // The graph holds accumulators weakly: these keep them (and the hooks).
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  Impl(Comm& c, at::Tensor g, Options o) : comm(c), grads(std::move(g)), options(o) {}

  void Launch(size_t b) {
    const auto [offset, numel] = buckets[b];
    work[b] = comm.AllReduceSumAsync(grads.narrow(0, offset, numel));
  }

  void OnReady(size_t param) {
    if (!armed || !options.overlap) return;
    const int b = bucket_of[param];
    if (++ready[b] != size[b]) return;
    while (next_launch < buckets.size() && ready[next_launch] == size[next_launch]) {
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
  im.size.assign(im.buckets.size(), 0);
  for (int b : im.bucket_of) ++im.size[b];
  im.ready.assign(im.buckets.size(), 0);
  im.work.resize(im.buckets.size());
  for (size_t k = 0; k < params.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params[k]);
    if (!acc) throw InternalError("GradBuckets: a parameter is not a leaf that requires grad");
    Impl* self = impl_.get();
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [self, k](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          self->OnReady(k);
          return outputs;
        }));
    im.accumulators.push_back(std::move(acc));
  }
}

GradBuckets::~GradBuckets() = default;

void GradBuckets::Arm() {
  std::fill(impl_->ready.begin(), impl_->ready.end(), 0);
  impl_->next_launch = 0;
  impl_->armed = true;
}

double GradBuckets::Finish() {
  auto& im = *impl_;
  const auto start = std::chrono::steady_clock::now();
  while (im.next_launch < im.buckets.size()) im.Launch(im.next_launch++);
  for (auto& w : im.work) w.Wait();
  im.armed = false;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t GradBuckets::num_buckets() const { return impl_->buckets.size(); }
std::pair<int64_t, int64_t> GradBuckets::bucket(size_t b) const { return impl_->buckets.at(b); }

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
    auto part = torch::empty({u, d + 2}, torch::kFloat);
    const auto gid = (local[c].ids + offsets[c]).contiguous();
    part.narrow(1, 0, 2).copy_(gid.view(torch::kFloat).view({u, 2}));
    part.narrow(1, 2, d).copy_(local[c].grads);
    parts.push_back(part);
  }
  return parts.empty() ? torch::empty({0, d + 2}, torch::kFloat) : torch::cat(parts);
}

}  // namespace

std::vector<RowGrads> SyncRows(Comm& comm, const std::vector<RowGrads>& local,
                               const std::vector<int64_t>& table_rows, int64_t docs_per_rank) {
  std::vector<RowGrads> out(local.size());
  if (local.empty()) return out;
  const int64_t d = local[0].grads.size(1);
  std::vector<size_t> dense, sparse;
  std::vector<int64_t> offsets(local.size());
  int64_t dense_numel = 0, sparse_rows = 0;
  for (size_t c = 0; c < local.size(); ++c) {
    if (local[c].grads.size(1) != d) throw InternalError("SyncRows: tables of different widths");
    if (table_rows[c] <= comm.world_size() * docs_per_rank) {
      offsets[c] = dense_numel;
      dense_numel += table_rows[c] * (d + 1);
      dense.push_back(c);
    } else {
      offsets[c] = sparse_rows;
      sparse_rows += table_rows[c];
      sparse.push_back(c);
    }
  }
  // Small tables: one all-reduce of [rows, D + 1] per table laid end to end
  // (gradient sums and, in the last column, touch counts); it runs while
  // the large tables' rows are gathered.
  at::Tensor summed;
  CommWork work;
  if (!dense.empty()) {
    summed = torch::zeros({dense_numel}, torch::kFloat);
    for (size_t c : dense) {
      auto table = summed.narrow(0, offsets[c], table_rows[c] * (d + 1)).view({table_rows[c], d + 1});
      table.narrow(1, 0, d).index_add_(0, local[c].ids, local[c].grads);
      table.select(1, d).index_fill_(0, local[c].ids, 1.0f);
    }
    work = comm.AllReduceSumAsync(summed);
  }
  if (!sparse.empty()) {
    const auto gathered = torch::cat(comm.AllGatherRows(PackRows(local, sparse, offsets, d)));
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
