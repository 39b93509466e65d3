#include "model/cpu_kernels.h"

#include <algorithm>

#include "topspin/core/simd.h"

namespace topspin {

TOPSPIN_VECTOR_CLONES
void AddBiasRelu(float* __restrict z, const float* __restrict bias, int64_t n, int64_t w,
                 bool relu) {
  for (int64_t i = 0; i < n; ++i) {
    float* __restrict row = z + i * w;
    if (relu) {
      for (int64_t j = 0; j < w; ++j) row[j] = std::max(row[j] + bias[j], 0.0f);
    } else {
      for (int64_t j = 0; j < w; ++j) row[j] += bias[j];
    }
  }
}

TOPSPIN_VECTOR_CLONES
void ReluBackward(const float* __restrict g, const float* __restrict z, int64_t count,
                  float* __restrict out) {
  for (int64_t k = 0; k < count; ++k) {
    const float gk = g[k];  // loaded unconditionally: a select, not a branch
    out[k] = z[k] > 0.0f ? gk : 0.0f;
  }
}

TOPSPIN_VECTOR_CLONES
void AddColumnSums(const float* __restrict x, int64_t n, int64_t w, float* __restrict sums) {
  for (int64_t i = 0; i < n; ++i) {
    const float* __restrict row = x + i * w;
    for (int64_t j = 0; j < w; ++j) sums[j] += row[j];
  }
}

TOPSPIN_VECTOR_CLONES
void AddInto(const float* __restrict src, int64_t count, float* __restrict dst) {
  for (int64_t k = 0; k < count; ++k) dst[k] += src[k];
}

}  // namespace topspin
