#include "topspin/data/column_stats.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

Column UniformColumn(size_t rows, uint64_t seed) {
  Column c(ColumnSpec{"x", DType::kFloat64});
  PhiloxStream rng(seed);
  for (size_t r = 0; r < rows; ++r) c.AppendFloat(rng.NextDouble());
  return c;
}

Column Slice(const Column& c, size_t begin, size_t end) {
  Column out(c.spec());
  for (size_t r = begin; r < end; ++r) out.AppendRow(c, r);
  return out;
}

TEST(ColumnStats, SmallColumnIsExact) {
  Column c(ColumnSpec{"x", DType::kInt32});
  for (int v : {4, 1, 3, 2, 5}) c.AppendInt(v);
  c.AppendNull();
  ColumnStatsBuilder b;
  b.Add(c, 0);
  const ColumnStats s = b.Finish();
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.nulls, 1u);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(2.0));  // population std of 1..5
  ASSERT_EQ(s.quantiles.size(), size_t(kQuantileEdges));
  EXPECT_EQ(s.quantiles.front(), 1);
  EXPECT_EQ(s.quantiles[32], 3);  // the median
  EXPECT_DOUBLE_EQ(s.quantiles[16], 2);
  EXPECT_DOUBLE_EQ(s.quantiles[8], 1.5);  // interpolated halfway between 1 and 2
  EXPECT_EQ(s.quantiles.back(), 5);
}

TEST(ColumnStats, NanInFloatColumnsCountsAsNull) {
  Column c(ColumnSpec{"x", DType::kFloat32});
  c.AppendFloat(1.0);
  c.AppendFloat(std::numeric_limits<double>::quiet_NaN());
  c.AppendNull();
  c.AppendFloat(3.0);
  ColumnStatsBuilder b;
  b.Add(c, 0);
  const ColumnStats s = b.Finish();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.nulls, 2u);
  EXPECT_DOUBLE_EQ(s.mean, 2);
}

TEST(ColumnStats, InfinitiesAreCountedAndLeftOutOfEveryStatistic) {
  Column c(ColumnSpec{"x", DType::kFloat32});
  for (double v : std::vector<double>{-INFINITY, INFINITY, 1.0, 3.0, INFINITY}) c.AppendFloat(v);
  ColumnStatsBuilder b;
  b.Add(c, 0);
  const ColumnStats s = b.Finish();
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.infinite, 3u);
  EXPECT_EQ(s.nulls, 0u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  EXPECT_DOUBLE_EQ(s.std, 1);
  ASSERT_EQ(s.quantiles.size(), size_t(kQuantileEdges));
  for (size_t i = 1; i < s.quantiles.size(); ++i) {
    EXPECT_TRUE(std::isfinite(s.quantiles[i]));
    EXPECT_LE(s.quantiles[i - 1], s.quantiles[i]);
  }
  // Only infinities: no value to take statistics of.
  Column only(ColumnSpec{"y", DType::kFloat64});
  only.AppendFloat(INFINITY);
  only.AppendFloat(-INFINITY);
  ColumnStatsBuilder ob;
  ob.Add(only, 0);
  EXPECT_EQ(ob.Finish().infinite, 2u);
  EXPECT_TRUE(ob.Finish().quantiles.empty());
  // Merged counts add up.
  b.Merge(ob);
  EXPECT_EQ(b.Finish().infinite, 5u);
}

TEST(ColumnStats, StringAndTokenColumnsUseRowLengths) {
  Column text(ColumnSpec{"t", DType::kString});
  text.AppendString("ab");
  text.AppendString("");
  text.AppendNull();
  text.AppendString("abcd");
  ColumnStatsBuilder b;
  b.Add(text, 0);
  ColumnStats s = b.Finish();
  EXPECT_EQ(s.nulls, 1u);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2);

  Column tokens(ColumnSpec{"k", DType::kTokensU16});
  const std::vector<uint32_t> three = {1, 2, 3}, one = {9};
  tokens.AppendTokens(three);
  tokens.AppendTokens(one);
  ColumnStatsBuilder tb;
  tb.Add(tokens, 0);
  s = tb.Finish();
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2);
}

TEST(ColumnStats, EmptyAndAllNullColumnsHaveNoValues) {
  ColumnStatsBuilder empty;
  empty.Add(Column(ColumnSpec{"x", DType::kFloat32}), 0);
  ColumnStats s = empty.Finish();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.nulls, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.std, 0);
  EXPECT_TRUE(s.quantiles.empty());

  Column nulls(ColumnSpec{"x", DType::kInt64});
  for (int i = 0; i < 10; ++i) nulls.AppendNull();
  ColumnStatsBuilder all_null;
  all_null.Add(nulls, 0);
  all_null.Merge(empty);
  s = all_null.Finish();
  EXPECT_EQ(s.count, 10u);
  EXPECT_EQ(s.nulls, 10u);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 0);
  EXPECT_TRUE(s.quantiles.empty());
}

TEST(ColumnStats, MergeOfSplitsEqualsSinglePass) {
  // Larger than the sample, so the sample really is a sample.
  const Column c = UniformColumn(50000, 3);
  ColumnStatsBuilder single(42);
  single.Add(c, 0);
  const ColumnStats want = single.Finish();

  for (const std::vector<size_t>& cuts :
       {std::vector<size_t>{0, 50000}, {0, 1, 20000, 20001, 50000}, {0, 12345, 33333, 50000}}) {
    // Builders filled in reverse order and merged pairwise, as threads might.
    std::vector<ColumnStatsBuilder> parts;
    for (size_t i = cuts.size() - 1; i > 0; --i) {
      parts.emplace_back(42);
      parts.back().Add(Slice(c, cuts[i - 1], cuts[i]), cuts[i - 1]);
    }
    ColumnStatsBuilder merged(42);
    for (const auto& p : parts) merged.Merge(p);
    const ColumnStats got = merged.Finish();
    EXPECT_EQ(got.count, want.count);
    EXPECT_EQ(got.min, want.min);
    EXPECT_EQ(got.max, want.max);
    EXPECT_NEAR(got.mean, want.mean, 1e-9);
    EXPECT_NEAR(got.std, want.std, 1e-9);
    EXPECT_EQ(got.quantiles, want.quantiles) << "the sample must not depend on the split";
  }
}

TEST(ColumnStats, SampleDependsOnSeedAndRowIndexNotOrder) {
  const Column c = UniformColumn(40000, 5);
  ColumnStatsBuilder a(1), b(2);
  a.Add(c, 0);
  b.Add(c, 0);
  EXPECT_NE(a.Finish().quantiles, b.Finish().quantiles);
  EXPECT_THROW(a.Merge(ColumnStatsBuilder(2)), Error);
}

TEST(ColumnStats, QuantileEdgesOfAMillionUniformValuesAreClose) {
  const Column c = UniformColumn(1000000, 11);
  ColumnStatsBuilder b(7);
  b.Add(c, 0);
  const ColumnStats s = b.Finish();
  ASSERT_EQ(s.quantiles.size(), size_t(kQuantileEdges));
  for (int i = 0; i < kQuantileEdges; ++i) {
    const double truth = static_cast<double>(i) / (kQuantileEdges - 1);
    EXPECT_NEAR(s.quantiles[i], truth, 0.02) << "edge " << i;
    if (i > 0) {
      EXPECT_LE(s.quantiles[i - 1], s.quantiles[i]);
    }
  }
  EXPECT_NEAR(s.mean, 0.5, 0.002);
  EXPECT_NEAR(s.std, std::sqrt(1.0 / 12), 0.002);
}

}  // namespace
}  // namespace topspin
