#include "topspin/pipeline/shuffle_quality.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace topspin {
namespace {

// Spearman's rho of two permutations of [0, n) (ranks are the values).
double Spearman(uint64_t n, const std::function<uint64_t(uint64_t)>& a,
                const std::function<uint64_t(uint64_t)>& b) {
  if (n < 2) return 0;
  double d2 = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double d = double(a(i)) - double(b(i));
    d2 += d * d;
  }
  const double nd = double(n);
  return 1 - 6 * d2 / (nd * (nd * nd - 1));
}

}  // namespace

ShuffleQuality MeasureShuffleQuality(uint64_t n, const std::function<uint64_t(uint64_t)>& epoch0,
                                     const std::function<uint64_t(uint64_t)>& epoch1,
                                     uint64_t block_size, uint64_t batch_size) {
  ShuffleQuality q;
  std::vector<uint64_t> order0(n), pos0(n), pos1(n);
  for (uint64_t p = 0; p < n; ++p) {
    order0[p] = epoch0(p);
    pos0[order0[p]] = p;
    pos1[epoch1(p)] = p;
  }
  double displacement = 0;
  uint64_t kept = 0;
  for (uint64_t p = 0; p < n; ++p) {
    displacement += std::fabs(double(order0[p]) - double(p));
    if (p + 1 < n && (order0[p + 1] == order0[p] + 1 || order0[p] == order0[p + 1] + 1)) ++kept;
  }
  q.mean_displacement = n > 0 ? displacement / double(n) / double(n) : 0;
  q.adjacent_kept = n > 1 ? double(kept) / double(n - 1) : 0;
  q.rank_correlation = Spearman(
      n, [&](uint64_t p) { return order0[p]; }, [](uint64_t p) { return p; });
  q.epoch_correlation = Spearman(
      n, [&](uint64_t s) { return pos0[s]; }, [&](uint64_t s) { return pos1[s]; });
  uint64_t batches = 0, blocks = 0;
  std::vector<uint64_t> ids;
  for (uint64_t start = 0; start + batch_size <= n; start += batch_size, ++batches) {
    ids.clear();
    for (uint64_t p = start; p < start + batch_size; ++p) ids.push_back(order0[p] / block_size);
    std::sort(ids.begin(), ids.end());
    blocks += static_cast<uint64_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
  }
  q.blocks_per_batch = batches > 0 ? double(blocks) / double(batches) : 0;
  return q;
}

ShuffleQuality MeasureShuffleQuality(const SampleOrder& order, uint64_t epoch, uint64_t block_size,
                                     uint64_t batch_size) {
  return MeasureShuffleQuality(
      order.size(), [&](uint64_t p) { return order.At(epoch, p); },
      [&](uint64_t p) { return order.At(epoch + 1, p); }, block_size, batch_size);
}

}  // namespace topspin
