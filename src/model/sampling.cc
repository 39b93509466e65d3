#include "topspin/model/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {

void CheckSamplingOptions(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    throw ConfigError(fmt::format("temperature {} is not a finite number >= 0", o.temperature),
                      ErrorWhere{.field = "--temperature"}, "0 is greedy, 1 the model's own distribution");
  }
  if (o.top_k < 0) {
    throw ConfigError(fmt::format("top-k {} is negative", o.top_k), ErrorWhere{.field = "--top-k"},
                      "0 keeps every token; 40 is common");
  }
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    throw ConfigError(fmt::format("top-p {} is not in (0, 1]", o.top_p),
                      ErrorWhere{.field = "--top-p"}, "1 keeps every token; 0.9 is common");
  }
}

int64_t SampleToken(std::span<const float> logits, const SamplingOptions& o, double u) {
  const int64_t n = int64_t(logits.size());
  if (n == 0) throw InternalError("SampleToken: no logits");
  // Most likely first; NaN ranks last, ties by id.
  const auto more_likely = [&](int64_t a, int64_t b) {
    const float x = logits[size_t(a)], y = logits[size_t(b)];
    if (std::isnan(x) != std::isnan(y)) return std::isnan(y);
    if (x != y && !std::isnan(x)) return x > y;
    return a < b;
  };
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, n) : n;
  if (o.temperature == 0 || k == 1) {
    return *std::min_element(ids.begin(), ids.end(), more_likely);
  }
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), more_likely);
  ids.resize(size_t(k));
  const double top = logits[size_t(ids[0])];
  if (!std::isfinite(top)) return ids[0];
  std::vector<double> p(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double l = logits[size_t(ids[i])];
    p[i] = std::isfinite(l) ? std::exp((l - top) / o.temperature) : 0.0;
    total += p[i];
  }
  size_t kept = p.size();
  if (o.top_p < 1) {
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      sum += p[i] / total;
      if (sum >= o.top_p) {
        kept = i + 1;
        break;
      }
    }
    total = std::accumulate(p.begin(), p.begin() + ptrdiff_t(kept), 0.0);
  }
  double cumulative = 0;
  const double target = u * total;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += p[i];
    if (target < cumulative) return ids[i];
  }
  // Rounding: u close to 1 lands past the last kept token's upper edge.
  for (size_t i = kept; i-- > 0;) {
    if (p[i] > 0) return ids[i];
  }
  return ids[0];
}

}  // namespace topspin
