#include "model/cpu_kernels.h"

#include <algorithm>

#include <ATen/Parallel.h>

#include "topspin/core/simd.h"

namespace topspin {
namespace {

// Floats per parallel task: a batch-32 ranker layer (1,149 x 128) splits in
// two; smaller tensors stay on the calling thread, where a fork would cost
// more than the loop.
constexpr int64_t kGrain = int64_t{1} << 14;

// The loops are cloned per ISA (TOPSPIN_VECTOR_CLONES); the lambdas that
// at::parallel_for runs are not, so they only call these.
TOPSPIN_VECTOR_CLONES
void AddBiasReluRows(float* __restrict z, const float* __restrict bias, int64_t begin,
                     int64_t end, int64_t w, bool relu) {
  for (int64_t i = begin; i < end; ++i) {
    float* __restrict row = z + i * w;
    if (relu) {
      for (int64_t j = 0; j < w; ++j) row[j] = std::max(row[j] + bias[j], 0.0f);
    } else {
      for (int64_t j = 0; j < w; ++j) row[j] += bias[j];
    }
  }
}

TOPSPIN_VECTOR_CLONES
void ReluBackwardRange(const float* __restrict g, const float* __restrict z, int64_t begin,
                       int64_t end, float* __restrict out) {
  for (int64_t k = begin; k < end; ++k) {
    const float gk = g[k];  // loaded unconditionally: a select, not a branch
    out[k] = z[k] > 0.0f ? gk : 0.0f;
  }
}

// Columns [j0, j1) of each row, rows in order: every column's sum adds the
// same values in the same order however the columns are split.
TOPSPIN_VECTOR_CLONES
void AddColumnSumsRange(const float* __restrict x, int64_t n, int64_t w, int64_t j0, int64_t j1,
                        float* __restrict sums) {
  for (int64_t i = 0; i < n; ++i) {
    const float* __restrict row = x + i * w;
    for (int64_t j = j0; j < j1; ++j) sums[j] += row[j];
  }
}

}  // namespace

void AddBiasRelu(float* z, const float* bias, int64_t n, int64_t w, bool relu) {
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / std::max<int64_t>(w, 1)),
                   [&](int64_t begin, int64_t end) { AddBiasReluRows(z, bias, begin, end, w, relu); });
}

void ReluBackward(const float* g, const float* z, int64_t count, float* out) {
  at::parallel_for(0, count, kGrain,
                   [&](int64_t begin, int64_t end) { ReluBackwardRange(g, z, begin, end, out); });
}

void AddColumnSums(const float* x, int64_t n, int64_t w, float* sums) {
  // Split the columns in blocks of 16 (one vector) when the matrix is large.
  const int64_t blocks = (w + 15) / 16;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(n * 16, 1));
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    AddColumnSumsRange(x, n, w, b0 * 16, std::min(w, b1 * 16), sums);
  });
}

TOPSPIN_VECTOR_CLONES
void AddInto(const float* __restrict src, int64_t count, float* __restrict dst) {
  for (int64_t k = 0; k < count; ++k) dst[k] += src[k];
}

}  // namespace topspin
