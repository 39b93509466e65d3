#include "topspin/core/deal.h"

#include <algorithm>
#include <numeric>

namespace topspin {

std::vector<int64_t> DealLargestFirst(const std::vector<int64_t>& sizes, int parts) {
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sizes[size_t(a)] > sizes[size_t(b)]; });
  std::vector<int64_t> dealt;
  dealt.reserve(order.size());
  for (size_t t = 0; t < size_t(std::max(parts, 1)); ++t) {
    for (size_t k = t; k < order.size(); k += size_t(std::max(parts, 1))) dealt.push_back(order[k]);
  }
  return dealt;
}

}  // namespace topspin
