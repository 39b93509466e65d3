#include "topspin/model/rank_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

void CheckList(std::span<const float> scores, std::span<const float> labels) {
  if (scores.size() != labels.size() || scores.empty()) {
    throw InternalError(
        fmt::format("rank metric: {} scores for {} labels", scores.size(), labels.size()));
  }
}

// Document indices by score descending; ties keep input order.
std::vector<size_t> RankOrder(std::span<const float> scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

size_t Cutoff(int k, size_t n) {
  return k <= 0 ? n : std::min(n, static_cast<size_t>(k));
}

double Gain(float label) {
  return std::exp2(static_cast<double>(label)) - 1;
}

double Discount(size_t rank0) {
  return 1.0 / std::log2(static_cast<double>(rank0) + 2);
}

}  // namespace

double NdcgAt(std::span<const float> scores, std::span<const float> labels, int k) {
  CheckList(scores, labels);
  const size_t n = Cutoff(k, scores.size());
  const auto order = RankOrder(scores);
  std::vector<float> ideal(labels.begin(), labels.end());
  std::sort(ideal.begin(), ideal.end(), std::greater<>());
  double dcg = 0, idcg = 0;
  for (size_t r = 0; r < n; ++r) {
    dcg += Gain(labels[order[r]]) * Discount(r);
    idcg += Gain(ideal[r]) * Discount(r);
  }
  return idcg > 0 ? dcg / idcg : 1.0;
}

double AveragePrecisionAt(std::span<const float> scores, std::span<const float> labels, int k) {
  CheckList(scores, labels);
  const size_t n = Cutoff(k, scores.size());
  const auto relevant = static_cast<size_t>(
      std::count_if(labels.begin(), labels.end(), [](float l) { return l > 0; }));
  if (relevant == 0) return 1.0;
  const auto order = RankOrder(scores);
  double sum = 0;
  size_t hits = 0;
  for (size_t r = 0; r < n; ++r) {
    if (labels[order[r]] > 0) sum += static_cast<double>(++hits) / static_cast<double>(r + 1);
  }
  return sum / static_cast<double>(std::min(relevant, n));
}

double ReciprocalRank(std::span<const float> scores, std::span<const float> labels) {
  CheckList(scores, labels);
  const auto order = RankOrder(scores);
  for (size_t r = 0; r < order.size(); ++r) {
    if (labels[order[r]] > 0) return 1.0 / static_cast<double>(r + 1);
  }
  return 1.0;
}

RankMetricAccumulator::RankMetricAccumulator(std::vector<int> ndcg_ks, int map_k)
    : ks_(std::move(ndcg_ks)), ndcg_sums_(ks_.size(), 0.0), map_k_(map_k) {}

void RankMetricAccumulator::AddList(std::span<const float> scores, std::span<const float> labels) {
  for (size_t i = 0; i < ks_.size(); ++i) ndcg_sums_[i] += NdcgAt(scores, labels, ks_[i]);
  map_sum_ += AveragePrecisionAt(scores, labels, map_k_);
  mrr_sum_ += ReciprocalRank(scores, labels);
  ++lists_;
}

void RankMetricAccumulator::AddBatch(std::span<const float> scores, std::span<const float> labels,
                                     std::span<const int64_t> offsets) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const auto begin = static_cast<size_t>(offsets[i]);
    const auto n = static_cast<size_t>(offsets[i + 1] - offsets[i]);
    if (n > 0) AddList(scores.subspan(begin, n), labels.subspan(begin, n));
  }
}

double RankMetricAccumulator::ndcg(int k) const {
  const auto it = std::find(ks_.begin(), ks_.end(), k);
  if (it == ks_.end()) throw InternalError(fmt::format("ndcg@{} was not accumulated", k));
  return lists_ ? ndcg_sums_[static_cast<size_t>(it - ks_.begin())] / double(lists_) : 0;
}

std::string RankMetricAccumulator::Summary() const {
  std::string out;
  for (int k : ks_) out += fmt::format("ndcg@{} {:.4f}, ", k, ndcg(k));
  return out + fmt::format("map@{} {:.4f}, mrr {:.4f} ({} lists)", map_k_, map(), mrr(), lists_);
}

}  // namespace topspin
