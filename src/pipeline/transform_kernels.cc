// The transform kernels: each chain runs block by block (kTransformBlock
// rows held in L1), every op a simple loop the compiler vectorises. The
// entry points are compiled for x86-64-v4 (AVX-512), v3 (AVX2) and the
// baseline, picked at load time (GCC target_clones), so one binary runs
// everywhere and uses the wide units where they exist.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/simd.h"
#include "topspin/pipeline/transform.h"

#define TOPSPIN_INLINE inline __attribute__((always_inline))

namespace topspin {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- loading ---------------------------------------------------------------

template <typename T>
TOPSPIN_INLINE void Widen(const std::byte* values, size_t begin, size_t n, float* x) {
  const T* v = reinterpret_cast<const T*>(values) + begin;
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(v[i]);
}

// Rows [begin, begin + n) of a numeric or bool column as float, NaN where null.
TOPSPIN_INLINE void LoadFloats(const Column& c, size_t begin, size_t n, float* x) {
  const std::byte* v = c.values().data();
  switch (c.dtype()) {
    case DType::kFloat32: Widen<float>(v, begin, n, x); break;  // GCC: an inline rep movsq
    case DType::kFloat64: Widen<double>(v, begin, n, x); break;
    case DType::kInt32: Widen<int32_t>(v, begin, n, x); break;
    case DType::kInt64: Widen<int64_t>(v, begin, n, x); break;
    case DType::kUInt8:
    case DType::kBool: Widen<uint8_t>(v, begin, n, x); break;
    default: throw InternalError("LoadFloats: not a numeric column");
  }
  const auto validity = c.validity();
  if (validity.empty()) return;
  size_t i = 0;
  if (begin % 8 == 0) {  // whole validity words: 32 lanes per word, vectorised
    const auto* bytes = reinterpret_cast<const uint8_t*>(validity.data()) + begin / 8;
    for (; i + 32 <= n; i += 32) {
      uint32_t w;
      std::memcpy(&w, bytes + i / 8, 4);  // little-endian: row i + k is bit k
      for (uint32_t k = 0; k < 32; ++k) x[i + k] = (w >> k) & 1 ? x[i + k] : kNaN;
    }
  }
  for (; i < n; ++i) {
    const size_t r = begin + i;
    const bool valid = (validity[r >> 3] >> (r & 7)) & 1;
    x[i] = valid ? x[i] : kNaN;
  }
}

// Hash keys of rows [begin, begin + n) (transform.h).
void LoadKeys(const Column& c, size_t begin, size_t n, uint64_t* keys) {
  const std::byte* v = c.values().data();
  switch (c.dtype()) {
    case DType::kInt64: std::memcpy(keys, v + begin * 8, n * 8); break;
    case DType::kInt32:
      for (size_t i = 0; i < n; ++i) {
        keys[i] = static_cast<uint64_t>(int64_t{reinterpret_cast<const int32_t*>(v)[begin + i]});
      }
      break;
    case DType::kUInt8:
    case DType::kBool:
      for (size_t i = 0; i < n; ++i) keys[i] = reinterpret_cast<const uint8_t*>(v)[begin + i];
      break;
    case DType::kString:
      for (size_t i = 0; i < n; ++i) keys[i] = Xxh3(c.StringAt(begin + i));
      break;
    case DType::kFloat32:
    case DType::kFloat64:
      for (size_t i = 0; i < n; ++i) {
        const double d = c.AsDouble(begin + i);
        keys[i] = std::isfinite(d) && std::fabs(d) < 9.2e18
                      ? static_cast<uint64_t>(static_cast<int64_t>(d))
                      : kNullHashKey;
      }
      return;  // AsDouble is NaN for nulls: done
    default: throw InternalError("LoadKeys: not a hashable column");
  }
  const auto validity = c.validity();
  if (validity.empty()) return;
  for (size_t i = 0; i < n; ++i) {
    const size_t r = begin + i;
    if (!((validity[r >> 3] >> (r & 7)) & 1)) keys[i] = kNullHashKey;
  }
}

// ---- value ops (float block, in place) --------------------------------------

// ln(u) for u in [1, FLT_MAX] (Cephes logf: frexp, then a degree-9
// polynomial on [sqrt(1/2) - 1, sqrt(2) - 1]); branch-free.
TOPSPIN_INLINE float LogAtLeastOne(float u) {
  const uint32_t bits = std::bit_cast<uint32_t>(u);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 126);
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1 : e;
  m = low ? m + m - 1 : m - 1;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  return m + y + 0.693359375f * e;
}

TOPSPIN_INLINE void Slog1pBlock(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float a = std::fabs(v);
    const float u = 1.0f + a;
    const float d = u - 1.0f;
    // Goldberg: ln(u) * a / (u - 1) corrects the rounding of 1 + a. Every
    // operation runs for every lane (no division by 0 to guard with a
    // branch), so the loop vectorises.
    const float safe_d = d == 0.0f ? 1.0f : d;
    float r = LogAtLeastOne(u) * (a / safe_d);
    r = d == 0.0f ? a : r;
    r = a == std::numeric_limits<float>::infinity() ? a : r;
    r = std::copysign(r, v);
    x[i] = v != v ? v : r;
  }
}

TOPSPIN_INLINE void ImputeBlock(float* x, size_t n, float value, float* missing) {
  if (missing != nullptr) {
    for (size_t i = 0; i < n; ++i) missing[i] = x[i] != x[i] ? 1.0f : 0.0f;
  }
  for (size_t i = 0; i < n; ++i) x[i] = x[i] != x[i] ? value : x[i];
}

TOPSPIN_INLINE void ClipBlock(float* x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i] < lo ? lo : x[i];  // NaN compares false: stays NaN
    x[i] = v > hi ? hi : v;
  }
}

TOPSPIN_INLINE void StandardizeBlock(float* x, size_t n, float mean, float inv_std) {
  for (size_t i = 0; i < n; ++i) x[i] = (x[i] - mean) * inv_std;
}

// Runs the value ops of `chain` over one block; `missing` receives the
// impute flag when the chain has one.
TOPSPIN_INLINE void ValueOps(const FeatureChain& chain, float* x, size_t n, float* missing) {
  for (const TransformStep& s : chain.steps) {
    switch (s.op) {
      case TransformOp::kImpute:
        ImputeBlock(x, n, static_cast<float>(s.a), s.flag ? missing : nullptr);
        break;
      case TransformOp::kLog1p: Slog1pBlock(x, n); break;
      case TransformOp::kClip:
        ClipBlock(x, n, static_cast<float>(s.a), static_cast<float>(s.b));
        break;
      case TransformOp::kStandardize:
        StandardizeBlock(x, n, static_cast<float>(s.a), static_cast<float>(s.b));
        break;
      default: break;  // cast: a no-op on floats; id ops are handled by the sparse runner
    }
  }
}

// ---- id ops -----------------------------------------------------------------

TOPSPIN_INLINE void BucketizeBlock(const float* x, size_t n, const std::vector<float>& edges,
                                   int64_t null_bucket, int64_t* ids) {
  for (size_t i = 0; i < n; ++i) ids[i] = 0;
  for (const float e : edges) {
    for (size_t i = 0; i < n; ++i) ids[i] += x[i] >= e ? 1 : 0;
  }
  for (size_t i = 0; i < n; ++i) ids[i] = x[i] != x[i] ? null_bucket : ids[i];
}

TOPSPIN_INLINE void ModSlots(uint64_t* h, size_t n, uint64_t slots) {
  if (std::has_single_bit(slots)) {
    for (size_t i = 0; i < n; ++i) h[i] &= slots - 1;
  } else {
    for (size_t i = 0; i < n; ++i) h[i] %= slots;
  }
}

TOPSPIN_INLINE void HashBlock(uint64_t* keys, size_t n, uint64_t seed, uint64_t slots) {
  for (size_t i = 0; i < n; ++i) keys[i] = Mix64(keys[i] ^ seed);
  ModSlots(keys, n, slots);
}

TOPSPIN_INLINE void CrossBlock(uint64_t* a, const uint64_t* b, size_t n, uint64_t seed,
                               uint64_t slots) {
  for (size_t i = 0; i < n; ++i) a[i] = Mix64(Mix64(a[i] ^ seed) + b[i]);
  ModSlots(a, n, slots);
}

template <typename T>
TOPSPIN_INLINE void WidenIds(const std::byte* values, size_t begin, size_t n, int64_t* ids) {
  const T* v = reinterpret_cast<const T*>(values) + begin;
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(v[i]);
}

// Integer and bool columns: the value is the id (a null row stores 0).
void CastIntIds(const Column& c, size_t begin, size_t n, int64_t* ids) {
  switch (c.dtype()) {
    case DType::kInt64: WidenIds<int64_t>(c.values().data(), begin, n, ids); break;
    case DType::kInt32: WidenIds<int32_t>(c.values().data(), begin, n, ids); break;
    case DType::kUInt8:
    case DType::kBool: WidenIds<uint8_t>(c.values().data(), begin, n, ids); break;
    default: throw InternalError("cast: not an integer column");
  }
}

TOPSPIN_INLINE void CastIdsBlock(const float* x, size_t n, int64_t* ids) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    ids[i] = v == v && std::fabs(v) < 9.2e18f ? static_cast<int64_t>(v) : 0;
  }
}

bool IsFloatType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64;
}

void CheckRows(const Column& c, size_t begin, size_t n) {
  if (begin + n > c.size()) {
    throw InternalError("transform: rows past the end of column \"" + c.name() + "\"");
  }
}

}  // namespace

TOPSPIN_VECTOR_CLONES
void Slog1pInPlace(float* x, size_t n) {
  Slog1pBlock(x, n);
}

TOPSPIN_VECTOR_CLONES
void RunDenseChain(const FeatureChain& chain, const Column& column, size_t begin, size_t n,
                   float* out, size_t stride) {
  CheckRows(column, begin, n);
  alignas(64) float x[kTransformBlock];
  alignas(64) float missing[kTransformBlock];
  const bool flag = chain.width() == 2;
  for (size_t at = 0; at < n; at += kTransformBlock) {
    const size_t m = std::min(kTransformBlock, n - at);
    LoadFloats(column, begin + at, m, x);
    ValueOps(chain, x, m, missing);
    float* o = out + at * stride;
    for (size_t i = 0; i < m; ++i) o[i * stride] = x[i];
    if (flag) {
      for (size_t i = 0; i < m; ++i) o[i * stride + 1] = missing[i];
    }
  }
}

TOPSPIN_VECTOR_CLONES
void RunDenseChainCompact(const FeatureChain& chain, const Column& column, size_t begin, size_t n,
                          float* values, size_t stride, uint8_t* flags, uint8_t flag_bit) {
  CheckRows(column, begin, n);
  alignas(64) float x[kTransformBlock];
  alignas(64) float missing[kTransformBlock];
  const bool flag = chain.width() == 2 && flags != nullptr;
  for (size_t at = 0; at < n; at += kTransformBlock) {
    const size_t m = std::min(kTransformBlock, n - at);
    // Contiguous values (a tile's column) are transformed in place.
    float* v = values + at * stride;
    float* xs = stride == 1 ? v : x;
    LoadFloats(column, begin + at, m, xs);
    ValueOps(chain, xs, m, missing);
    if (stride != 1) {
      for (size_t i = 0; i < m; ++i) v[i * stride] = x[i];
    }
    if (flag) {
      uint8_t* f = flags + at;
      for (size_t i = 0; i < m; ++i) f[i] |= missing[i] != 0.0f ? flag_bit : uint8_t{0};
    }
  }
}

TOPSPIN_VECTOR_CLONES
void WidenInt32(const int32_t* in, size_t n, int64_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i];
}

namespace {

void InterleavePairRowsScalar(const float* values, const uint8_t* flags, size_t rows, size_t n,
                              size_t flag_bytes, float* out) {
  for (size_t r = 0; r < rows; ++r, values += n, flags += flag_bytes, out += 2 * n) {
    for (size_t j = 0; j < n; ++j) {
      out[2 * j] = values[j];
      out[2 * j + 1] = static_cast<float>((flags[j >> 3] >> (j & 7)) & 1);
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// Eight pairs at a time: the flag byte is the mask that puts 1.0 in the
// flag lanes, and one two-source permute interleaves them with the values.
__attribute__((target("avx512f"))) void InterleavePairRowsAvx512(const float* values,
                                                                 const uint8_t* flags,
                                                                 size_t rows, size_t n,
                                                                 size_t flag_bytes, float* out) {
  const __m512i pairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512 ones = _mm512_set1_ps(1.0f);
  for (size_t r = 0; r < rows; ++r, values += n, flags += flag_bytes, out += 2 * n) {
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m512 v = _mm512_castps256_ps512(_mm256_loadu_ps(values + j));
      const __m512 f = _mm512_maskz_mov_ps(static_cast<__mmask16>(flags[j >> 3]), ones);
      _mm512_storeu_ps(out + 2 * j, _mm512_permutex2var_ps(v, pairs, f));
    }
    for (; j < n; ++j) {
      out[2 * j] = values[j];
      out[2 * j + 1] = static_cast<float>((flags[j >> 3] >> (j & 7)) & 1);
    }
  }
}
#endif

}  // namespace

void InterleavePairRows(const float* values, const uint8_t* flags, size_t rows, size_t n,
                        size_t flag_bytes, float* out) {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return InterleavePairRowsAvx512(values, flags, rows, n, flag_bytes, out);
#endif
  InterleavePairRowsScalar(values, flags, rows, n, flag_bytes, out);
}

namespace {

void TransposeTileScalar(const float* tile, size_t tile_stride, size_t n, size_t rows,
                         size_t first_row, float* out) {
  for (size_t r = first_row; r < rows; ++r) {
    for (size_t j = 0; j < n; ++j) out[r * n + j] = tile[j * tile_stride + r];
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// Rows [0, rows - rows % 8) in 8 x 8 blocks (the classic unpack, shuffle,
// permute sequence); a row's last n % 8 values one at a time.
__attribute__((target("avx"))) size_t TransposeTileAvx(const float* tile, size_t tile_stride,
                                                       size_t n, size_t rows, float* out) {
  const size_t full_rows = rows / 8 * 8, full_n = n / 8 * 8;
  for (size_t r = 0; r < full_rows; r += 8) {
    for (size_t j = 0; j < full_n; j += 8) {
      const float* in = tile + j * tile_stride + r;
      __m256 a[8];
      for (size_t k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(in + k * tile_stride);
      __m256 t[8];
      for (size_t k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(a[k], a[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(a[k], a[k + 1]);
      }
      __m256 u[8];
      for (size_t k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      float* o = out + r * n + j;
      for (size_t k = 0; k < 4; ++k) {
        _mm256_storeu_ps(o + k * n, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(o + (k + 4) * n, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
      }
    }
    for (size_t k = 0; k < 8; ++k) {
      for (size_t j = full_n; j < n; ++j) out[(r + k) * n + j] = tile[j * tile_stride + r + k];
    }
  }
  return full_rows;
}
#endif

}  // namespace

void TransposeTile(const float* tile, size_t tile_stride, size_t n, size_t rows, float* out) {
  size_t done = 0;
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx = __builtin_cpu_supports("avx");
  if (avx) done = TransposeTileAvx(tile, tile_stride, n, rows, out);
#endif
  TransposeTileScalar(tile, tile_stride, n, rows, done, out);
}

TOPSPIN_VECTOR_CLONES
void RunSparseChain(const FeatureChain& chain, const Column& a, const Column* b, size_t begin,
                    size_t n, int64_t* out, size_t stride) {
  CheckRows(a, begin, n);
  if (b != nullptr) CheckRows(*b, begin, n);
  const TransformStep& last = chain.steps.back();
  alignas(64) float x[kTransformBlock];
  alignas(64) uint64_t keys[kTransformBlock];
  alignas(64) uint64_t keys_b[kTransformBlock];
  alignas(64) int64_t ids[kTransformBlock];
  for (size_t at = 0; at < n; at += kTransformBlock) {
    const size_t m = std::min(kTransformBlock, n - at);
    const int64_t* result = ids;
    switch (last.op) {
      case TransformOp::kBucketize:
        LoadFloats(a, begin + at, m, x);
        ValueOps(chain, x, m, nullptr);
        BucketizeBlock(x, m, last.edges, static_cast<int64_t>(last.count), ids);
        break;
      case TransformOp::kCast:
        if (IsFloatType(a.dtype())) {
          LoadFloats(a, begin + at, m, x);
          CastIdsBlock(x, m, ids);
        } else {
          CastIntIds(a, begin + at, m, ids);
        }
        break;
      case TransformOp::kHash:
        LoadKeys(a, begin + at, m, keys);
        HashBlock(keys, m, last.seed, last.count);
        result = reinterpret_cast<const int64_t*>(keys);
        break;
      case TransformOp::kCross:
        if (b == nullptr) throw InternalError("cross without its second column");
        LoadKeys(a, begin + at, m, keys);
        LoadKeys(*b, begin + at, m, keys_b);
        CrossBlock(keys, keys_b, m, last.seed, last.count);
        result = reinterpret_cast<const int64_t*>(keys);
        break;
      default: throw InternalError("a sparse chain must end in an id op");
    }
    int64_t* o = out + at * stride;
    for (size_t i = 0; i < m; ++i) o[i * stride] = result[i];
  }
}

}  // namespace topspin
