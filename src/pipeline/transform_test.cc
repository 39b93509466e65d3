#include "topspin/pipeline/transform.h"

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Columns x (float32), n (int32), id (int64), s (string); x's sketch is
// 0, 1, ..., 64 with mean 32 and std 10.
Manifest TestManifest() {
  Manifest m;
  m.schema = {{"x", DType::kFloat32},
              {"n", DType::kInt32},
              {"id", DType::kInt64},
              {"s", DType::kString},
              {"t", DType::kTokensU16}};
  ColumnStats x{.count = 100, .nulls = 5, .min = 0, .max = 64, .mean = 32, .std = 10};
  for (int i = 0; i < kQuantileEdges; ++i) x.quantiles.push_back(i);
  m.stats["x"] = x;
  m.stats["n"] = ColumnStats{.count = 10, .min = 1, .max = 9, .mean = 4, .std = 2, .quantiles = {}};
  m.stats["id"] = ColumnStats{.count = 4, .min = 0, .max = 1e12, .mean = 0, .std = 0, .quantiles = {}};
  return m;
}

FeatureChain Resolved(const std::string& text, FeatureKind kind = FeatureKind::kDense,
                      uint64_t seed = 7) {
  FeatureChain c = ParseFeatureChain(text, kind, "pipeline.dense[0]");
  ResolveFeatureChain(c, TestManifest(), seed);
  return c;
}

std::string ConfigMessage(const std::string& text, FeatureKind kind) {
  try {
    Resolved(text, kind);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    return e.Message();
  }
  return "no error";
}

Column Floats(const std::vector<float>& values, const std::vector<bool>& null = {}) {
  Column c({"x", DType::kFloat32});
  for (size_t i = 0; i < values.size(); ++i) {
    if (i < null.size() && null[i]) {
      c.AppendNull();
    } else {
      c.AppendFloat(values[i]);
    }
  }
  return c;
}

TEST(FeatureChain, ParsesOpsArgumentsAndOutputs) {
  const FeatureChain c = ParseFeatureChain(" x : impute(median, flag) | log1p | clip(-1, 2.5) ",
                                           FeatureKind::kDense, "f");
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.columns, std::vector<std::string>{"x"});
  EXPECT_EQ(c.steps[0].impute_stat, "median");
  EXPECT_TRUE(c.steps[0].flag);
  EXPECT_EQ(c.steps[2].a, -1);
  EXPECT_EQ(c.steps[2].b, 2.5);
  EXPECT_EQ(c.width(), 2u);
  EXPECT_EQ(c.OutputNames(), (std::vector<std::string>{"x", "x_missing"}));
  const FeatureChain cross = ParseFeatureChain("id x s: cross(1000)", FeatureKind::kSparse, "f");
  EXPECT_EQ(cross.columns, (std::vector<std::string>{"id", "s"}));
  EXPECT_EQ(cross.OutputNames(), std::vector<std::string>{"id_x_s"});
  EXPECT_EQ(cross.steps[0].count, 1000u);
}

TEST(FeatureChain, BadChainsNameTheFieldTheOffsetAndTheFix) {
  const auto msg = [](const std::string& t, FeatureKind k = FeatureKind::kDense) {
    return ConfigMessage(t, k);
  };
  EXPECT_NE(msg("x: standardise").find("did you mean \"standardize\""), std::string::npos)
      << msg("x: standardise");
  EXPECT_NE(msg("x: standardise").find("pipeline.dense[0]"), std::string::npos);
  EXPECT_NE(msg("x: standardise").find("character 4"), std::string::npos) << msg("x: standardise");
  EXPECT_NE(msg("x log1p").find("no \":\""), std::string::npos);
  EXPECT_NE(msg("x: hash(10)").find("pipeline.sparse"), std::string::npos);
  EXPECT_NE(msg("x: log1p", FeatureKind::kSparse).find("ends in"), std::string::npos);
  EXPECT_NE(msg("x: cross(10)", FeatureKind::kSparse).find("two columns"), std::string::npos);
  EXPECT_NE(msg("x x id: hash(10)", FeatureKind::kSparse).find("cross"), std::string::npos);
  EXPECT_NE(msg("x: clip(3, 1)").find("lo <= hi"), std::string::npos);
  EXPECT_NE(msg("x: clip(1)").find("takes 2 arguments, got 1"), std::string::npos);
  EXPECT_NE(msg("x: bucketize(65)", FeatureKind::kSparse).find("[1, 64]"), std::string::npos);
  EXPECT_NE(msg("x: impute(abc)").find("not a finite number"), std::string::npos);
  EXPECT_NE(msg("x: log1p | | clip(0, 1)").find("empty transform"), std::string::npos);
  EXPECT_NE(msg("x: impute(0) | impute(1)").find("twice"), std::string::npos);
  EXPECT_NE(msg("x: log1p | hash(4)", FeatureKind::kSparse).find("cannot stand before"),
            std::string::npos);
  EXPECT_NE(msg("xx: log1p").find("did you mean \"x\""), std::string::npos) << msg("xx: log1p");
  EXPECT_NE(msg("s: log1p").find("is string"), std::string::npos) << msg("s: log1p");
  EXPECT_NE(msg("t: hash(8)", FeatureKind::kSparse).find("tokens_u16"), std::string::npos);
  Manifest negative = TestManifest();
  negative.stats["n"].min = -1;  // cast ids must be non-negative
  FeatureChain cast = ParseFeatureChain("n: cast", FeatureKind::kSparse, "pipeline.sparse[0]");
  try {
    ResolveFeatureChain(cast, negative, 0);
    ADD_FAILURE() << "negative cast ids accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("hash the column instead"), std::string::npos) << e.Message();
  }
}

TEST(FeatureChain, ResolvesConstantsFromTheManifest) {
  const FeatureChain c = Resolved("x: impute(mean) | standardize");
  EXPECT_DOUBLE_EQ(c.steps[0].a, 32);   // the manifest mean
  EXPECT_DOUBLE_EQ(c.steps[1].a, 32);   // first value op: exact mean
  EXPECT_DOUBLE_EQ(c.steps[1].b, 0.1);  // and 1 / std
  EXPECT_DOUBLE_EQ(Resolved("x: impute(median)").steps[0].a, 32);
  EXPECT_DOUBLE_EQ(Resolved("x: impute(max)").steps[0].a, 64);
  // After clip(0, 16) the sketch is min(e, 16): buckets below 16 contribute
  // their midpoints (sum 128), the 48 above contribute 16 each (768).
  const FeatureChain clipped = Resolved("x: clip(0, 16) | standardize");
  EXPECT_NEAR(clipped.steps[1].a, (128.0 + 768.0) / 64, 1e-12);
  // Quartile edges of 0..64 are 16, 32, 48.
  const FeatureChain b = Resolved("x: bucketize(4)", FeatureKind::kSparse);
  EXPECT_EQ(b.steps[0].edges, (std::vector<float>{16, 32, 48}));
  EXPECT_EQ(b.cardinality, 5u);  // 4 buckets and the null bucket
  EXPECT_EQ(Resolved("id: hash(8)", FeatureKind::kSparse).cardinality, 8u);
  EXPECT_EQ(Resolved("n: cast", FeatureKind::kSparse).cardinality, 10u);  // max 9
  EXPECT_EQ(Resolved("id: hash(8)", FeatureKind::kSparse, 99).steps[0].seed, 99u);
}

TEST(FeatureChain, InfiniteValuesMustBeClippedBeforeTheModel) {
  Manifest m = TestManifest();
  m.stats["x"].infinite = 2;
  const auto resolve = [&](const char* text, FeatureKind kind) {
    FeatureChain c = ParseFeatureChain(text, kind, "pipeline.dense[4]");
    ResolveFeatureChain(c, m, 7);
  };
  try {
    resolve("x: log1p | standardize", FeatureKind::kDense);
    FAIL() << "infinite values reach the model";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "pipeline.dense[4]");
    EXPECT_NE(e.Message().find("column \"x\" holds 2 infinite values"), std::string::npos)
        << e.Message();
    EXPECT_NE(e.Message().find("x: log1p | standardize | clip(0, 64)"), std::string::npos)
        << e.Message();
  }
  EXPECT_NO_THROW(resolve("x: log1p | clip(-5, 5)", FeatureKind::kDense));
  EXPECT_NO_THROW(resolve("x: bucketize(4)", FeatureKind::kSparse));  // inf has a bucket
}

TEST(Transform, DenseChainMatchesHandComputedValues) {
  // 1, null, 3, +inf, -inf, and a stored NaN value.
  const Column col = Floats({1, 0, 3, kInf, -kInf, kNaN}, {false, true});
  const FeatureChain c = Resolved("x: impute(2, flag) | log1p | standardize | clip(-5, 5)");
  std::vector<float> out(6 * 3, -99);
  RunDenseChain(c, col, 0, 6, out.data(), 3);
  const auto expect = [&](double raw) {
    return std::clamp((std::log1p(raw) - c.steps[2].a) * c.steps[2].b, -5.0, 5.0);
  };
  const double in[6] = {1, 2, 3, 0, 0, 2};
  for (int r = 0; r < 6; ++r) {
    SCOPED_TRACE(r);
    if (r == 3 || r == 4) {
      EXPECT_EQ(out[r * 3], r == 3 ? 5 : -5);  // infinities clip to the bounds
    } else {
      EXPECT_NEAR(out[r * 3], expect(in[r]), 1e-5);
    }
    EXPECT_EQ(out[r * 3 + 1], r == 1 || r == 5 ? 1 : 0);  // missing flag
    EXPECT_EQ(out[r * 3 + 2], -99);                       // untouched
  }
}

TEST(Transform, IntegerNullsAndRowRangesAcrossBlocks) {
  Column n({"n", DType::kInt32});
  const size_t rows = 3 * kTransformBlock + 17;
  for (size_t r = 0; r < rows; ++r) {
    if (r % 7 == 3) {
      n.AppendNull();
    } else {
      n.AppendInt(static_cast<int64_t>(r));
    }
  }
  const FeatureChain c = Resolved("n: impute(-1) | clip(0, 1000)");
  const size_t begin = 5, count = rows - 9;
  std::vector<float> out(count);
  RunDenseChain(c, n, begin, count, out.data(), 1);
  for (size_t i = 0; i < count; ++i) {
    const size_t r = begin + i;
    ASSERT_EQ(out[i], r % 7 == 3 ? 0.0f : std::min<float>(r, 1000)) << r;
  }
  RunDenseChain(c, n, rows, 0, nullptr, 1);  // zero rows: nothing to do
  EXPECT_THROW(RunDenseChain(c, n, rows - 1, 2, out.data(), 1), Error);
}

TEST(Transform, CompactChainWritesTheSameValuesAndOrsTheMissingFlagIntoItsPlane) {
  Column x({"x", DType::kFloat32});
  const size_t rows = 2 * kTransformBlock + 45;
  for (size_t r = 0; r < rows; ++r) {
    if (r % 5 == 2 || r % 11 == 0) {
      x.AppendNull();
    } else {
      x.AppendFloat(static_cast<float>(r % 97) - 40.0f);
    }
  }
  const FeatureChain c = Resolved("x: impute(3, flag) | log1p | standardize | clip(-2, 2)");
  // begin 0 and 16 take the whole-validity-byte path, 5 the row-by-row one.
  for (const size_t begin : {size_t{0}, size_t{16}, size_t{5}}) {
    SCOPED_TRACE(begin);
    const size_t n = rows - begin - 3, stride = 3;
    std::vector<float> reference(n * 2);
    RunDenseChain(c, x, begin, n, reference.data(), 2);
    std::vector<float> values(n * stride, -99.0f);
    std::vector<uint8_t> plane(n, uint8_t{0x01});  // another chain's flag, kept
    RunDenseChainCompact(c, x, begin, n, values.data() + 1, stride, plane.data(), 0x20);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(values[i * stride + 1], reference[2 * i]) << i;
      ASSERT_EQ(values[i * stride], -99.0f) << i;
      ASSERT_EQ(plane[i], reference[2 * i + 1] != 0.0f ? 0x21 : 0x01) << i;
    }
    // No plane: only the values are written.
    std::vector<float> only(n, -99.0f);
    RunDenseChainCompact(c, x, begin, n, only.data(), 1, nullptr, 0x20);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(only[i], reference[2 * i]) << i;
  }
  EXPECT_THROW(RunDenseChainCompact(c, x, rows - 1, 2, nullptr, 1, nullptr, 0), Error);
}

TEST(Transform, InterleavePairRowsAlternatesValuesAndFlagBits) {
  for (const size_t n : {size_t{1}, size_t{8}, size_t{24}, size_t{37}}) {
    for (const size_t rows : {size_t{0}, size_t{1}, size_t{5}}) {
      const size_t flag_bytes = (n + 7) / 8;
      std::vector<float> v(rows * n);
      std::vector<uint8_t> bits(rows * flag_bytes);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.5f;
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint8_t>(37 * i + 11);
      std::vector<float> out(rows * 2 * n + 1, -7.0f);
      InterleavePairRows(v.data(), bits.data(), rows, n, flag_bytes, out.data());
      for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < n; ++j) {
          const float flag = (bits[r * flag_bytes + j / 8] >> (j % 8)) & 1 ? 1.0f : 0.0f;
          ASSERT_EQ(out[r * 2 * n + 2 * j], v[r * n + j]) << n << " " << r << " " << j;
          ASSERT_EQ(out[r * 2 * n + 2 * j + 1], flag) << n << " " << r << " " << j;
        }
      }
      EXPECT_EQ(out[rows * 2 * n], -7.0f);  // nothing past the rows
    }
  }
}

TEST(Transform, TransposeTileLaysColumnsIntoRows) {
  for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{24}, size_t{37}}) {
    for (const size_t rows : {size_t{0}, size_t{1}, size_t{8}, size_t{13}, size_t{256}}) {
      const size_t stride = rows + 5;  // the tile's columns are longer than the rows used
      std::vector<float> tile(n * stride);
      for (size_t i = 0; i < tile.size(); ++i) tile[i] = static_cast<float>(i) + 0.25f;
      std::vector<float> out(rows * n + 1, -7.0f);
      TransposeTile(tile.data(), stride, n, rows, out.data());
      for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < n; ++j) {
          ASSERT_EQ(out[r * n + j], tile[j * stride + r])
              << n << " " << rows << " " << r << " " << j;
        }
      }
      EXPECT_EQ(out[rows * n], -7.0f);  // nothing past the rows
    }
  }
}

TEST(Transform, WidenInt32KeepsEveryValue) {
  const std::vector<int32_t> in = {0, 1, -1, 262143, std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(), 7, 8, 9, 10, 11, 12, 13,
                                   14, 15, 16, 17, -18};
  std::vector<int64_t> out(in.size() + 1, -7);
  WidenInt32(in.data(), in.size(), out.data());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], int64_t{in[i]}) << i;
  EXPECT_EQ(out.back(), -7);
}

TEST(Transform, Slog1pIsAccurateEverywhere) {
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, 1e-8f, -1e-8f,  1e-4f,    0.5f, 1,
                           2,    10,    1e6f,   -1e6f, 3.4e38f, -3.4e38f, kInf, -kInf};
  PhiloxStream rng(3);
  for (int i = 0; i < 20000; ++i) {
    xs.push_back(static_cast<float>(std::exp(rng.NextNormal() * 8) * (i % 2 ? 1 : -1)));
  }
  std::vector<float> y = xs;
  Slog1pInPlace(y.data(), y.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double exact = std::copysign(std::log1p(std::fabs(double(xs[i]))), double(xs[i]));
    if (std::isinf(exact)) {
      EXPECT_EQ(y[i], exact);
    } else {
      ASSERT_NEAR(y[i], exact, 1e-6 * std::fabs(exact) + 1e-38) << xs[i];
      EXPECT_EQ(std::signbit(y[i]), std::signbit(xs[i])) << xs[i];
    }
  }
  // One at a time (the scalar tail) gives the vector body's bits.
  for (size_t i = 0; i < xs.size(); ++i) {
    float one = xs[i];
    Slog1pInPlace(&one, 1);
    ASSERT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(y[i])) << xs[i];
  }
  float nan = kNaN;
  Slog1pInPlace(&nan, 1);
  EXPECT_TRUE(std::isnan(nan));
}

TEST(Transform, BucketizeHashCrossAndCastIds) {
  const Column x = Floats({-1, 16, 31.9f, 32, 100, 0}, {false, false, false, false, false, true});
  std::vector<int64_t> ids(6 * 2, -7);
  RunSparseChain(Resolved("x: bucketize(4)", FeatureKind::kSparse), x, nullptr, 0, 6, ids.data(),
                 2);
  EXPECT_EQ((std::vector<int64_t>{ids[0], ids[2], ids[4], ids[6], ids[8], ids[10]}),
            (std::vector<int64_t>{0, 1, 1, 2, 3, 4}));  // edges 16, 32, 48; null -> 4
  EXPECT_EQ(ids[1], -7);

  Column id({"id", DType::kInt64});
  Column s({"s", DType::kString});
  const int64_t big = int64_t{1} << 40;
  for (int64_t v : {int64_t{5}, big, int64_t{-3}}) id.AppendInt(v);
  id.AppendNull();
  for (const char* v : {"a", "", "zz"}) s.AppendString(v);
  s.AppendNull();
  const uint64_t seed = 7, slots = 1000;  // not a power of two: mod
  std::vector<int64_t> h(4);
  RunSparseChain(Resolved("id: hash(1000)", FeatureKind::kSparse), id, nullptr, 0, 4, h.data(), 1);
  const uint64_t keys[4] = {5, uint64_t(big), uint64_t(-3), kNullHashKey};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(uint64_t(h[r]), Mix64(keys[r] ^ seed) % slots) << r;

  RunSparseChain(Resolved("s: hash(1024)", FeatureKind::kSparse), s, nullptr, 0, 4, h.data(), 1);
  EXPECT_EQ(uint64_t(h[0]), Mix64(Xxh3("a") ^ seed) & 1023);
  EXPECT_EQ(uint64_t(h[1]), Mix64(Xxh3("") ^ seed) & 1023);
  EXPECT_EQ(uint64_t(h[3]), Mix64(kNullHashKey ^ seed) & 1023);

  RunSparseChain(Resolved("id x s: cross(1000)", FeatureKind::kSparse), id, &s, 0, 4, h.data(), 1);
  EXPECT_EQ(uint64_t(h[2]), Mix64(Mix64(uint64_t(-3) ^ seed) + Xxh3("zz")) % 1000);

  RunSparseChain(Resolved("id: cast", FeatureKind::kSparse), id, nullptr, 0, 4, h.data(), 1);
  EXPECT_EQ(h, (std::vector<int64_t>{5, big, -3, 0}));  // exact beyond float precision
  RunSparseChain(Resolved("x: cast", FeatureKind::kSparse), x, nullptr, 0, 6, h.data(), 0);
  EXPECT_EQ(h[0], 0);  // stride 0: every row wrote out[0]; the last row is null -> 0
}

// Floats that do not fit int64 (NaN, infinities, 1e30) are guarded by a
// select before the conversion; the kernels are built without assuming
// float traps (CMakeLists.txt), so the conversion may run for every lane,
// and the select must still pick the guarded value.
TEST(Transform, FloatIdsOutOfInt64RangeTakeTheNullId) {
  const std::vector<float> values = {1.5f, kNaN, kInf, -kInf, 1e30f, -2.5f, -1e30f, 7};
  std::vector<bool> nulls(values.size(), false);
  nulls.back() = true;
  std::vector<float> many;  // 64 copies: the vector body, not just the scalar tail
  std::vector<bool> many_nulls;
  for (int k = 0; k < 64; ++k) {
    many.insert(many.end(), values.begin(), values.end());
    many_nulls.insert(many_nulls.end(), nulls.begin(), nulls.end());
  }
  const Column x = Floats(many, many_nulls);
  const size_t n = many.size(), w = values.size();
  std::vector<int64_t> ids(n, -7);
  RunSparseChain(Resolved("x: cast", FeatureKind::kSparse), x, nullptr, 0, n, ids.data(), 1);
  const std::vector<int64_t> cast = {1, 0, 0, 0, 0, -2, 0, 0};
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(ids[i], cast[i % w]) << i;

  RunSparseChain(Resolved("x: hash(1024)", FeatureKind::kSparse), x, nullptr, 0, n, ids.data(), 1);
  const uint64_t seed = 7;
  const uint64_t keys[] = {1,
                           kNullHashKey,
                           kNullHashKey,
                           kNullHashKey,
                           kNullHashKey,
                           uint64_t(-2),
                           kNullHashKey,
                           kNullHashKey};
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(uint64_t(ids[i]), Mix64(keys[i % w] ^ seed) & 1023) << i;
  }
}

}  // namespace
}  // namespace topspin
