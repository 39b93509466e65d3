// The CPU's one-pass optimizer kernels over flat float32 buffers
// (DenseOptimizer's fused path; flat_params.h). Plain loops over raw
// pointers, split across LibTorch's intra-op threads: this file includes no
// LibTorch header beyond ATen/Parallel.h and is compiled with
// -fno-math-errno (so sqrt vectorises) and -ffp-contract=off (so the vector
// body and the scalar tail round alike: a result never depends on where a
// thread's chunk or a ZeRO shard begins).
#pragma once

#include <cstdint>

namespace topspin {

// One AdamW step's constants; float like the buffers, the bias corrections
// taken in double first (as LibTorch's fused kernel does).
struct AdamWConstants {
  float grad_scale = 1;    // g = grads[i] * grad_scale (1 / loss terms, times clipping)
  float decay = 1;         // 1 - lr * weight_decay
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float step_size = 0;     // lr / (1 - beta1^t)
  float bc2_sqrt = 1;      // sqrt(1 - beta2^t)
  float eps = 1e-8f;

  static AdamWConstants Make(double lr, double beta1, double beta2, double eps,
                             double weight_decay, int64_t step, double grad_scale);
};

// For every i < n, in one pass over the four buffers:
//   g = grads[i] * grad_scale
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p = p decay - step_size m / (sqrt(v) / bc2_sqrt + eps)
//   grads[i] = 0   (the step consumes the gradient: no separate zeroing pass)
void AdamWStepCpu(float* params, float* grads, float* m, float* v, int64_t n,
                  const AdamWConstants& c);

// The same loop over [begin, end) on the calling thread (AdamWStepCpu's task).
void AdamWRangeCpu(float* p, float* g, float* m, float* v, int64_t begin, int64_t end,
                   const AdamWConstants& c);

// Lazy Adam's constants for one step t: c1 = 1 / (1 - beta1^t) and
// c2 = 1 / (1 - beta2^t), taken in double first.
struct LazyAdamConstants {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, c1 = 1, c2 = 1, eps = 1e-8f;
};

// Sparse updates touch rows scattered over tables far larger than the
// cache: the updates fetch the row kSparseRowsAhead ahead of the one they
// update, each of its 64-byte lines, for writing.
inline constexpr int64_t kSparseRowsAhead = 8;
inline void PrefetchRowForWrite(const float* table, int64_t row, int64_t e) {
  for (int64_t j = 0; j < e; j += 16) __builtin_prefetch(table + row * e + j, 1);
}

// Lazy Adam on the u distinct rows `rows` of a [*, e] table w with moments
// m and v; grads is [u, e], row k the gradient of row rows[k]:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   w -= lr m c1 / (sqrt(v c2) + eps)
// Rows must be distinct and in range (the caller checks).
void LazyAdamRowsCpu(float* w, float* m, float* v, const float* grads, const int64_t* rows,
                     int64_t u, int64_t e, const LazyAdamConstants& c);

// Sum of x[i]^2 in double: one read pass, no temporaries. Blocks of a fixed
// size are summed in order, so the result is the same for any thread count.
// Non-finite exactly when some element is (a finite float squared cannot
// overflow a double).
double SumOfSquaresCpu(const float* x, int64_t n);

// Elements of x that are NaN or infinite (the message of a skipped step).
int64_t CountNonFiniteCpu(const float* x, int64_t n);

}  // namespace topspin
