// The element-wise passes of the ranker's fused CPU nodes (ranker.cc):
// plain loops over float32 rows, compiled for AVX-512, AVX2 and the
// baseline (TOPSPIN_VECTOR_CLONES). Branch-free, so they vectorise. The
// first three split large inputs over LibTorch's intra-op threads
// (at::parallel_for); every output element is computed the same way however
// the work is split, so the results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace topspin {

// z[i, j] += bias[j] for z [n, w], then max(z, 0) when `relu`.
void AddBiasRelu(float* z, const float* bias, int64_t n, int64_t w, bool relu);
// out[k] = z[k] > 0 ? g[k] : 0: ReLU's backward given its output z.
void ReluBackward(const float* g, const float* z, int64_t count, float* out);
// sums[j] += x[i, j] over the rows of x [n, w] (a bias gradient).
void AddColumnSums(const float* x, int64_t n, int64_t w, float* sums);
// dst[k] += src[k] for k < count.
void AddInto(const float* src, int64_t count, float* dst);

}  // namespace topspin
