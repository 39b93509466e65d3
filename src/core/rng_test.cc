#include "topspin/core/rng.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

// Known-answer vectors from Random123's kat_vectors ("philox4x32 10").
TEST(Philox4x32, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox4x32, Word0OverLanesEqualsOneBlockAtATime) {
  std::vector<uint32_t> c0(100);
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<uint32_t>(i * 2654435761u);
  c0[0] = 0xffffffffu;
  std::vector<uint32_t> out(c0.size() + 1, 7);
  for (const PhiloxKey key : {PhiloxKey{0, 0}, PhiloxKey{0xdeadbeef, 12345}}) {
    Philox4x32Word0(c0.data(), 3, 0x9abcdef0u, 42, key, c0.size(), out.data());
    for (size_t i = 0; i < c0.size(); ++i) {
      ASSERT_EQ(out[i], Philox4x32({c0[i], 3, 0x9abcdef0u, 42}, key)[0]) << i;
    }
    EXPECT_EQ(out.back(), 7u);  // nothing past n
  }
}

TEST(PhiloxStream, FirstWordsAreTheBlockOfCounterZero) {
  PhiloxStream stream(0, 0);
  const PhiloxCounter block = Philox4x32({0, 0, 0, 0}, {0, 0});
  for (uint32_t expected : block) EXPECT_EQ(stream.NextU32(), expected);
}

TEST(PhiloxStream, SeekReproducesAnyPosition) {
  PhiloxStream a(42, 3);
  std::vector<uint32_t> words;
  for (int i = 0; i < 100; ++i) words.push_back(a.NextU32());
  PhiloxStream b(42, 3);
  for (uint64_t i : {57u, 0u, 99u, 4u, 3u}) {
    b.Seek(i);
    EXPECT_EQ(b.NextU32(), words[i]) << "position " << i;
  }
}

TEST(PhiloxStream, SeedsAndStreamsDiffer) {
  EXPECT_NE(PhiloxStream(1, 0).NextU64(), PhiloxStream(2, 0).NextU64());
  EXPECT_NE(PhiloxStream(1, 0).NextU64(), PhiloxStream(1, 1).NextU64());
  // The high half of a 64-bit seed matters too.
  EXPECT_NE(PhiloxStream(1, 0).NextU64(), PhiloxStream(1 | (uint64_t{1} << 40), 0).NextU64());
}

TEST(PhiloxStream, NextBelowIsInRangeAndUnbiased) {
  PhiloxStream rng(9);
  constexpr int kBuckets = 6, kDraws = 60000;
  std::vector<int> counts(kBuckets);
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = rng.NextBelow(kBuckets);
    ASSERT_LT(v, kBuckets);
    ++counts[v];
  }
  // Chi-square with 5 degrees of freedom; 20.5 is the 0.999 quantile.
  double chi2 = 0;
  for (int c : counts) chi2 += std::pow(c - kDraws / kBuckets, 2) / (kDraws / kBuckets);
  EXPECT_LT(chi2, 20.5);
}

TEST(PhiloxStream, FloatsAndNormalsHaveTheRightMoments) {
  PhiloxStream rng(11);
  constexpr int kN = 100000;
  double sum_u = 0, sum_z = 0, sum_z2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = rng.NextDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const float f = rng.NextFloat();
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    sum_u += u;
    const double z = rng.NextNormal();
    sum_z += z;
    sum_z2 += z * z;
  }
  EXPECT_NEAR(sum_u / kN, 0.5, 0.01);
  EXPECT_NEAR(sum_z / kN, 0.0, 0.02);
  EXPECT_NEAR(sum_z2 / kN, 1.0, 0.02);
}

}  // namespace
}  // namespace topspin
