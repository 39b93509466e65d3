#include "topspin/train/sparse_state.h"

#include <fmt/format.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "topspin/core/deal.h"
#include "topspin/ddp/comm.h"
#include "train/checkpoint_io.h"

namespace topspin {

SparseState::SparseState(std::vector<at::Tensor> tables, const SparseOptimizer::Options& options,
                         Comm* comm, int64_t docs_per_rank)
    : tables_(std::move(tables)),
      comm_(comm),
      docs_per_rank_(docs_per_rank),
      row_state_vectors_(options.kind == SparseOptimizer::Kind::kLazyAdam ? 2 : 0),
      ids_(tables_.size()),
      leaves_(tables_.size()) {
  for (const auto& t : tables_) {
    optimizers_.emplace_back(t, options);
    table_rows_.push_back(t.size(0));
  }
}

void SparseState::Add(const std::vector<at::Tensor>& unique_ids,
                      const std::vector<at::Tensor>& rows) {
  for (size_t c = 0; c < tables_.size(); ++c) {
    ids_[c].push_back(unique_ids[c]);
    leaves_[c].push_back(rows[c]);
  }
}

int64_t SparseState::RowsToGather() const {
  std::vector<int64_t> unique(tables_.size());
  for (size_t c = 0; c < tables_.size(); ++c) {
    const auto& seen = ids_[c];
    unique[c] =
        seen.size() == 1 ? seen[0].size(0) : std::get<0>(at::_unique(torch::cat(seen))).size(0);
  }
  return SparseRowCount(unique, table_rows_, comm_ ? comm_->world_size() : 1, docs_per_rank_);
}

void SparseState::Collect() {
  rows_.clear();
  for (size_t c = 0; c < tables_.size(); ++c) {
    std::vector<at::Tensor> grads;
    for (const auto& leaf : leaves_[c]) grads.push_back(leaf.grad());
    rows_.push_back(ids_[c].size() == 1 ? RowGrads{ids_[c][0], grads[0]}
                                        : CoalesceRows(torch::cat(ids_[c]), torch::cat(grads)));
    ids_[c].clear();
    leaves_[c].clear();
  }
}

void SparseState::Sync(const std::vector<int64_t>& sparse_rows,
                       const std::function<void()>& in_flight) {
  rows_ = SyncRows(*comm_, rows_, table_rows_, docs_per_rank_, &sparse_rows, in_flight);
}

// On the CPU the tables are split over at::parallel_for: each table is
// stepped by one thread, its rows in the same order either way, so the
// result does not depend on the thread count. The tables are dealt to the
// threads largest first (by this step's rows), so that a thread does not get
// the two big ones while another gets two 17-row tables.
void SparseState::Step(double lr) {
  const auto n = static_cast<int64_t>(tables_.size());
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (size_t c = 0; c < rows.size(); ++c) rows[c] = rows_[c].ids.numel();
  const std::vector<int64_t> dealt = DealLargestFirst(rows, at::get_num_threads());
  const auto step = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const auto c = size_t(dealt[size_t(k)]);
      optimizers_[c].Step(tables_[c], rows_[c].ids, rows_[c].grads, lr);
    }
  };
  if (n > 1 && tables_[0].is_cpu()) {
    at::parallel_for(0, n, 1, step);
  } else {
    step(0, n);
  }
}

void SparseState::set_optimizer_steps(int64_t steps) {
  for (auto& o : optimizers_) o.set_steps(steps);
}

double SparseState::StepBytes() const {
  double bytes = 0;
  for (const auto& r : rows_) bytes += double(r.grads.numel()) * 4 * (4 + 2 * row_state_vectors_);
  return bytes;
}

NamedTensors SparseState::Gather() {
  NamedTensors out;
  for (size_t c = 0; c < tables_.size(); ++c) {
    out.emplace_back(fmt::format("table{}", c), tables_[c]);
    const auto s = optimizers_[c].state();
    for (size_t i = 0; i < s.size(); ++i) out.emplace_back(fmt::format("table{}.opt{}", c, i), s[i]);
  }
  for (auto& [name, t] : out) t = t.to(torch::kCPU).contiguous();
  return out;
}

void SparseState::LoadParameters(const SafetensorsFile& file) {
  torch::NoGradGuard no_grad;
  for (size_t c = 0; c < tables_.size(); ++c) {
    CopyFromCheckpoint(file, fmt::format("table{}", c), tables_[c]);
  }
}

void SparseState::Load(const SafetensorsFile& file) {
  LoadParameters(file);
  for (size_t c = 0; c < tables_.size(); ++c) {
    auto s = optimizers_[c].state();
    for (size_t i = 0; i < s.size(); ++i) {
      CopyFromCheckpoint(file, fmt::format("table{}.opt{}", c, i), s[i]);
    }
  }
}

}  // namespace topspin
