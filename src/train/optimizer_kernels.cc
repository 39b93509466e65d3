#include "train/optimizer_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>

namespace topspin {
namespace {

// Elements per parallel task: large enough to amortise scheduling, small
// enough that two threads share a 10M-element buffer evenly.
constexpr int64_t kGrain = int64_t{1} << 15;

}  // namespace

AdamWConstants AdamWConstants::Make(double lr, double beta1, double beta2, double eps,
                                    double weight_decay, int64_t step, double grad_scale) {
  const double bc1 = 1 - std::pow(beta1, double(step));
  const double bc2 = 1 - std::pow(beta2, double(step));
  return {.grad_scale = float(grad_scale),
          .decay = float(1 - lr * weight_decay),
          .beta1 = float(beta1),
          .one_minus_beta1 = float(1 - beta1),
          .beta2 = float(beta2),
          .one_minus_beta2 = float(1 - beta2),
          .step_size = float(lr / bc1),
          .bc2_sqrt = float(std::sqrt(bc2)),
          .eps = float(eps)};
}

void AdamWStepCpu(float* params, float* grads, float* m, float* v, int64_t n,
                  const AdamWConstants& c) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    float* __restrict p = params;
    float* __restrict g = grads;
    float* __restrict mm = m;
    float* __restrict vv = v;
    for (int64_t i = begin; i < end; ++i) {
      const float grad = g[i] * c.grad_scale;
      const float m1 = c.beta1 * mm[i] + c.one_minus_beta1 * grad;
      const float v1 = c.beta2 * vv[i] + c.one_minus_beta2 * (grad * grad);
      const float denom = std::sqrt(v1) / c.bc2_sqrt + c.eps;
      p[i] = p[i] * c.decay - c.step_size * m1 / denom;
      mm[i] = m1;
      vv[i] = v1;
      g[i] = 0;
    }
  });
}

double SumOfSquaresCpu(const float* x, int64_t n) {
  constexpr int64_t kBlock = int64_t{1} << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* __restrict p = x + b * kBlock;
      const int64_t len = std::min(kBlock, n - b * kBlock);
      double lane[8] = {};  // independent chains: the loop is not latency-bound
      int64_t i = 0;
      for (; i + 8 <= len; i += 8) {
        for (int k = 0; k < 8; ++k) lane[k] += double(p[i + k]) * double(p[i + k]);
      }
      for (; i < len; ++i) lane[0] += double(p[i]) * double(p[i]);
      double s = 0;
      for (double l : lane) s += l;
      partial[size_t(b)] = s;
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

int64_t CountNonFiniteCpu(const float* x, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(x[i]) ? 0 : 1;
  return bad;
}

}  // namespace topspin
