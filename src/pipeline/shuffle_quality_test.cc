#include "topspin/pipeline/shuffle_quality.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

constexpr uint64_t kN = 100000, kBlock = 1000, kBatch = 64;

ShuffleQuality Of(ShuffleMode mode) {
  const SampleOrder order(kN, {.mode = mode, .seed = 3, .block_size = kBlock, .window_blocks = 8});
  return MeasureShuffleQuality(order, 0, kBlock, kBatch);
}

TEST(ShuffleQuality, IdentityIsUnshuffled) {
  const ShuffleQuality q = Of(ShuffleMode::kNone);
  EXPECT_EQ(q.mean_displacement, 0);
  EXPECT_DOUBLE_EQ(q.rank_correlation, 1);
  EXPECT_DOUBLE_EQ(q.adjacent_kept, 1);
  EXPECT_DOUBLE_EQ(q.epoch_correlation, 1);
  EXPECT_NEAR(q.blocks_per_batch, 1.06, 0.01);  // a batch straddles two blocks 63 times in 1000
}

TEST(ShuffleQuality, GlobalMatchesAUniformPermutation) {
  std::vector<uint64_t> a(kN), b(kN);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  std::mt19937_64 rng(1);
  std::shuffle(a.begin(), a.end(), rng);
  std::shuffle(b.begin(), b.end(), rng);
  const ShuffleQuality ideal = MeasureShuffleQuality(
      kN, [&](uint64_t p) { return a[p]; }, [&](uint64_t p) { return b[p]; }, kBlock, kBatch);
  const ShuffleQuality q = Of(ShuffleMode::kGlobal);
  for (const ShuffleQuality& s : {ideal, q}) {
    EXPECT_NEAR(s.mean_displacement, 1.0 / 3, 0.005);
    EXPECT_LT(std::abs(s.rank_correlation), 0.01);
    EXPECT_LT(std::abs(s.epoch_correlation), 0.01);
    EXPECT_LT(s.adjacent_kept, 1e-3);
    // 64 uniform draws from 100 blocks hit 100 * (1 - 0.99^64) = 47.4 distinct ones.
    EXPECT_NEAR(s.blocks_per_batch, 100 * (1 - std::pow(0.99, 64)), 0.5);
  }
}

TEST(ShuffleQuality, BlockMixesGloballyButKeepsBatchesLocal) {
  const ShuffleQuality q = Of(ShuffleMode::kBlock);
  EXPECT_GT(q.mean_displacement, 0.25);  // blocks travel across the epoch
  EXPECT_LT(std::abs(q.rank_correlation), 0.2);
  EXPECT_LT(q.adjacent_kept, 0.01);          // samples within a window are shuffled
  EXPECT_LE(q.blocks_per_batch, 8.0 + 1.0);  // at most a window's blocks (+ a boundary)
}

}  // namespace
}  // namespace topspin
