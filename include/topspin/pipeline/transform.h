// Feature transforms: per-column chains declared in the config, resolved
// against a dataset's manifest statistics, run over a decoded row group.
//
// A chain is one string (config lists pipeline.dense and pipeline.sparse):
//   "<column>: <op> | <op> | ..."          e.g. "sales_7d: impute(mean, flag) | log1p |
//   standardize"
//   "<a> x <b>: cross(<slots>)"            a hashed pair of categoricals
// Dense chains produce float32 features (one, plus one missing flag when
// impute says `flag`); sparse chains produce one int64 id and must end in
// bucketize, hash, cross or cast. Ops, in the order they may appear:
//   impute(V [, flag])  null/NaN -> V; V is a number or mean|median|min|max
//                       of the present values; `flag` adds a feature that
//                       is 1 where the value was missing, else 0
//   log1p               sign(x) * ln(1 + |x|)  (= log1p for x >= 0; defined
//                       for every x, so heavy tails of either sign compress)
//   clip(lo, hi)        min(max(x, lo), hi); NaN stays NaN
//   standardize         (x - mean) / std with the mean and std of the present
//                       values at that point of the chain (std 0 -> 1)
//   cast                dense: the value as float32 (what every dense chain
//                       does anyway); sparse: the value as an int64 id
//                       (null -> 0, floats truncated toward zero)
//   bucketize(N)        sparse: the quantile bucket in [0, N) by N - 1 edges
//                       at q(1/N) ... q((N-1)/N); null -> N. 1 <= N <= 64
//   hash(S)             sparse: Mix64(key ^ seed) mod S, in [0, S)
//   cross(S)            sparse, two columns: Mix64(Mix64(key_a ^ seed) + key_b) mod S
// where a value's key is its bits for integers and bools, xxh3-64 of its
// bytes for strings, its value truncated to int64 for floats, and
// kNullHashKey for a null (and a NaN).
//
// Statistics. The manifest has each column's exact mean and std and a
// 65-edge quantile sketch of its present values. An op that needs
// statistics after earlier value-changing ops (standardize after log1p,
// bucketize after clip) pushes the sketch through those ops (exact for the
// edges, since every op is monotone) and re-estimates mean and std from it
// as a piecewise-uniform distribution; standing first in a chain, they are
// exact. Resolve() fixes every constant, so a resolved chain is a pure
// function of the row values: output never depends on threads or order.
//
// Every inner loop runs over blocks of kTransformBlock rows (in L1) and is
// written so the compiler vectorises it (docs/PIPELINE.md shows how to
// check); the whole chain of one column runs in one pass over the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/manifest.h"

namespace topspin {

inline constexpr size_t kTransformBlock = 512;

enum class TransformOp { kImpute, kLog1p, kClip, kStandardize, kCast, kBucketize, kHash, kCross };
const char* TransformOpName(TransformOp op);

// One parsed op; its constants are filled by Resolve().
struct TransformStep {
  TransformOp op = TransformOp::kCast;
  // impute: "mean", "median", "min", "max" or "" (a number, in a).
  std::string impute_stat;
  bool flag = false;         // impute(..., flag)
  double a = 0, b = 0;       // impute value; clip lo, hi; standardize mean, 1/std
  uint64_t count = 0;        // bucketize N; hash/cross slots
  uint64_t seed = 0;         // hash, cross
  std::vector<float> edges;  // bucketize, after Resolve()
};

enum class FeatureKind { kDense, kSparse };

// A chain as written, then resolved.
struct FeatureChain {
  FeatureKind kind = FeatureKind::kDense;
  std::vector<std::string> columns;  // one, or two for cross
  std::vector<TransformStep> steps;
  std::string text;   // as written, for messages
  std::string field;  // "pipeline.dense[3]"

  // Sparse chains, after Resolve(): ids lie in [0, cardinality): S for
  // hash and cross, N + 1 for bucketize (the null bucket), max + 1 of the
  // column's manifest statistics for cast.
  uint64_t cardinality = 0;

  // Outputs this chain writes: dense 1 (+1 with an impute flag), sparse 1.
  size_t width() const;
  // Output names, e.g. {"sales_7d", "sales_7d_missing"} or {"brand_x_category"}.
  std::vector<std::string> OutputNames() const;
};

// Parses one chain. Throws Error{kConfig} naming `field`, the character
// offset in `text` and what is wrong (unknown ops get "did you mean").
FeatureChain ParseFeatureChain(std::string_view text, FeatureKind kind, std::string field);

// Checks the chain's columns against the manifest schema (with "did you
// mean") and dtypes, and fixes every constant from its statistics.
// `seed` keys hash and cross. Throws Error{kConfig}.
void ResolveFeatureChain(FeatureChain& chain, const Manifest& manifest, uint64_t seed);

// The 64-bit finaliser of MurmurHash3 (fmix64): a bijection of uint64 that
// hash and cross use. Public so peers and tests can reproduce ids exactly.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
inline constexpr uint64_t kNullHashKey = 0x9e3779b97f4a7c15ULL;

// Applies a resolved dense chain to `column` rows [begin, begin + n),
// writing feature j of row r to out[r * stride + j] for j < chain.width().
void RunDenseChain(const FeatureChain& chain, const Column& column, size_t begin, size_t n,
                   float* out, size_t stride);
// The same chain for a compact row-major cache: row r's value goes to
// values[r * stride] and, when the chain has a missing flag and `flags` is
// not null, flags[r] |= flag_bit for each missing row (`flags` is one byte
// per row: a plane of 8 flags that the caller packs into its rows).
void RunDenseChainCompact(const FeatureChain& chain, const Column& column, size_t begin, size_t n,
                          float* values, size_t stride, uint8_t* flags, uint8_t flag_bit);
// Applies a resolved sparse chain (`b` is the second column of a cross,
// else unused) and writes row r's id to out[r * stride].
void RunSparseChain(const FeatureChain& chain, const Column& a, const Column* b, size_t begin,
                    size_t n, int64_t* out, size_t stride);

// Vectorisable kernels (exposed for tests and benchmarks). n <= any size.
// Slog1p: sign(x) * ln(1 + |x|), within 1e-6 relative of the exact value;
// NaN stays NaN, infinities stay infinite.
void Slog1pInPlace(float* x, size_t n);
// out[i] = in[i] for i < n: cached int32 ids into the batch's int64.
void WidenInt32(const int32_t* in, size_t n, int64_t* out);
// (value, missing flag) feature rows from their cached parts: for each of
// `rows` rows r and j < n, out[r * 2n + 2j] = values[r * n + j] and
// out[r * 2n + 2j + 1] = bit j % 8 of flags[r * flag_bytes + j / 8] (0 or 1).
void InterleavePairRows(const float* values, const uint8_t* flags, size_t rows, size_t n,
                        size_t flag_bytes, float* out);
// Row-major rows from a column-major tile: out[r * n + j] =
// tile[j * tile_stride + r] for r < rows <= tile_stride and j < n. The
// transform writes each chain's block of values contiguously into a tile
// and this lays them into the cache's rows, 8 x 8 at a time with AVX,
// where storing each value at its row's place took a store per value
// into a line of its own.
void TransposeTile(const float* tile, size_t tile_stride, size_t n, size_t rows, float* out);
}  // namespace topspin
