#include "train/optimizer_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>

#include "topspin/core/simd.h"

namespace topspin {
namespace {

// Elements per parallel task: large enough to amortise a fork (a few
// microseconds), small enough that the shop ranker's 32k dense parameters
// split over two threads.
constexpr int64_t kGrain = int64_t{1} << 13;

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

TOPSPIN_VECTOR_CLONES
void AdamWRangeCpu(float* __restrict p, float* __restrict g, float* __restrict m,
                   float* __restrict v, int64_t begin, int64_t end, const AdamWConstants& c) {
  // The constants in registers: through the reference, every store to the
  // buffers could alias them, and the loop would reload them per element.
  const float grad_scale = c.grad_scale, decay = c.decay, beta1 = c.beta1, beta2 = c.beta2,
              one_minus_beta1 = c.one_minus_beta1, one_minus_beta2 = c.one_minus_beta2,
              step_size = c.step_size, bc2_sqrt = c.bc2_sqrt, eps = c.eps;
  for (int64_t i = begin; i < end; ++i) {
    const float grad = g[i] * grad_scale;
    const float m1 = beta1 * m[i] + one_minus_beta1 * grad;
    const float v1 = beta2 * v[i] + one_minus_beta2 * (grad * grad);
    const float denom = std::sqrt(v1) / bc2_sqrt + eps;
    p[i] = p[i] * decay - step_size * m1 / denom;
    m[i] = m1;
    v[i] = v1;
    g[i] = 0;
  }
}

void AdamWStepCpu(float* params, float* grads, float* m, float* v, int64_t n,
                  const AdamWConstants& c) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    AdamWRangeCpu(params, grads, m, v, begin, end, c);
  });
}

TOPSPIN_VECTOR_CLONES
void LazyAdamRowsCpu(float* __restrict w, float* __restrict m, float* __restrict v,
                     const float* __restrict grads, const int64_t* __restrict rows, int64_t u,
                     int64_t e, const LazyAdamConstants& c) {
  const float lr = c.lr, b1 = c.beta1, b2 = c.beta2, c1 = c.c1, c2 = c.c2, eps = c.eps;
  for (int64_t k = 0; k < u; ++k) {
    if (k + kSparseRowsAhead < u) {  // the weights' and moments' lines of a later row
      const int64_t next = rows[k + kSparseRowsAhead];
      PrefetchRowForWrite(w, next, e);
      PrefetchRowForWrite(m, next, e);
      PrefetchRowForWrite(v, next, e);
    }
    const float* __restrict gr = grads + k * e;
    float* __restrict wr = w + rows[k] * e;
    float* __restrict mr = m + rows[k] * e;
    float* __restrict vr = v + rows[k] * e;
    for (int64_t j = 0; j < e; ++j) {
      mr[j] = b1 * mr[j] + (1 - b1) * gr[j];
      vr[j] = b2 * vr[j] + (1 - b2) * gr[j] * gr[j];
      wr[j] -= lr * mr[j] * c1 / (std::sqrt(vr[j] * c2) + eps);
    }
  }
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
