#include "topspin/pipeline/sample_order.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topspin {
namespace {

using ::testing::HasSubstr;

const std::vector<uint64_t> kSizes = {1, 2, 3, 4, 5, 7, 16, 1000, 4097};

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), uint64_t{0});
  return v;
}

std::vector<uint64_t> Epoch(const SampleOrder& order, uint64_t epoch) {
  std::vector<uint64_t> samples;
  for (uint64_t p = 0; p < order.size(); ++p) samples.push_back(order.At(epoch, p));
  return samples;
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

size_t CountDifferent(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t different = 0;
  for (size_t i = 0; i < a.size(); ++i) different += a[i] != b[i];
  return different;
}

// Every shuffle configuration the tests run, block ones with short last
// blocks and windows (n = 1000, B = 7: 143 blocks, the last of 6 samples).
std::vector<SampleOrderOptions> AllModes(uint64_t seed) {
  return {{.mode = ShuffleMode::kNone, .seed = seed},
          {.mode = ShuffleMode::kGlobal, .seed = seed},
          {.mode = ShuffleMode::kBlock, .seed = seed, .block_size = 7, .window_blocks = 3},
          {.mode = ShuffleMode::kBlock, .seed = seed, .block_size = 64, .window_blocks = 4},
          {.mode = ShuffleMode::kBlock, .seed = seed, .block_size = 1, .window_blocks = 1},
          {.mode = ShuffleMode::kBlock, .seed = seed, .block_size = 10, .window_blocks = 1000}};
}

// ---- KeyedPermutation ------------------------------------------------------

TEST(KeyedPermutation, IsABijectionWithAnInverseForManySizes) {
  for (uint64_t n : kSizes) {
    for (uint64_t seed : {0u, 1u, 99u}) {
      const KeyedPermutation perm(n, seed, /*epoch=*/3, /*stream=*/5);
      std::vector<uint64_t> image;
      for (uint64_t i = 0; i < n; ++i) {
        image.push_back(perm(i));
        ASSERT_EQ(perm.Inverse(image.back()), i) << "n " << n << " i " << i;
        ASSERT_EQ(perm(perm.Inverse(i)), i) << "n " << n << " i " << i;
      }
      EXPECT_EQ(Sorted(image), Iota(n)) << "n " << n << " seed " << seed;
    }
  }
}

// Apply (the rounds over many inputs at once, cycle walks compacted) gives
// exactly the values of operator(), for ranges that start anywhere and
// span several lanes' worth.
// Apply (the rounds over many inputs at once, cycle walks refilled from
// the inputs) gives exactly the values of operator(), in input order, for
// runs of inputs and scattered ones, fewer and more than a lane's worth.
TEST(KeyedPermutation, ApplyEqualsOneAtATime) {
  for (uint64_t n : kSizes) {
    const KeyedPermutation perm(n, /*seed=*/7, /*epoch=*/2, /*stream=*/1);
    std::vector<uint64_t> all(n), scattered;
    for (uint64_t i = 0; i < n; ++i) all[i] = i;
    for (uint64_t i = 0; i < 3 * n; ++i) scattered.push_back((i * 7919) % n);
    for (const auto& in : {all, scattered, std::vector<uint64_t>{n - 1}, std::vector<uint64_t>{}}) {
      std::vector<uint64_t> out(in.size() + 1, ~uint64_t{0});
      perm.Apply(in, out.data());
      for (size_t k = 0; k < in.size(); ++k) ASSERT_EQ(out[k], perm(in[k])) << n << " " << k;
      EXPECT_EQ(out[in.size()], ~uint64_t{0});  // nothing past the inputs
    }
  }
  uint64_t out = 0;
  const std::vector<uint64_t> outside = {10};
  EXPECT_THROW(KeyedPermutation(10, 1, 0).Apply(outside, &out), Error);
}

TEST(KeyedPermutation, WorksUpToTheLargestSizes) {
  for (uint64_t n : {(uint64_t{1} << 63) + 5, ~uint64_t{0}, uint64_t{1} << 32}) {
    const KeyedPermutation perm(n, 7, 1);
    std::set<uint64_t> seen;
    for (uint64_t i : {uint64_t{0}, uint64_t{1}, n / 2, n - 2, n - 1}) {
      const uint64_t j = perm(i);
      EXPECT_LT(j, n);
      EXPECT_EQ(perm.Inverse(j), i);
      seen.insert(j);
    }
    EXPECT_EQ(seen.size(), 5u);
  }
}

TEST(KeyedPermutation, KeysSelectIndependentPermutations) {
  const uint64_t n = 1000;
  auto image = [&](uint64_t seed, uint64_t epoch, uint64_t stream) {
    const KeyedPermutation perm(n, seed, epoch, stream);
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(perm(i));
    return v;
  };
  const auto base = image(1, 2, 3);
  EXPECT_EQ(image(1, 2, 3), base);
  const uint64_t high = uint64_t{1} << 40;  // the high 32 bits of each key part count too
  for (const auto& other : {image(2, 2, 3), image(1, 3, 3), image(1, 2, 4), image(1 | high, 2, 3),
                            image(1, 2 | high, 3), image(1, 2, 3 | high)}) {
    EXPECT_GT(CountDifferent(base, other), n * 9 / 10);
  }
}

TEST(KeyedPermutation, RejectsEmptyRangesAndOutOfRangeIndices) {
  EXPECT_THROW(KeyedPermutation(0, 1, 1), Error);
  const KeyedPermutation perm(10, 1, 1);
  EXPECT_THROW(perm(10), Error);
  EXPECT_THROW(perm.Inverse(10), Error);
}

// ---- SampleOrder -----------------------------------------------------------

TEST(SampleOrder, EveryEpochIsAPermutationInEveryMode) {
  for (uint64_t n : kSizes) {
    for (const auto& options : AllModes(42)) {
      const SampleOrder order(n, options);
      for (uint64_t epoch : {0u, 1u}) {
        EXPECT_EQ(Sorted(Epoch(order, epoch)), Iota(n))
            << "n " << n << " mode " << ShuffleModeName(options.mode) << " block "
            << options.block_size << " window " << options.window_blocks;
      }
    }
  }
}

TEST(SampleOrder, AtManyEqualsAtInEveryMode) {
  for (uint64_t n : kSizes) {
    for (const auto& options : AllModes(42)) {
      const SampleOrder order(n, options);
      std::vector<uint64_t> positions;
      for (uint64_t p = 0; p < n; ++p) positions.push_back(p);
      for (uint64_t p = n; p-- > n / 2;) positions.push_back(p);  // and again, backwards
      std::vector<uint64_t> many(positions.size());
      order.AtMany(1, positions, many.data());
      for (size_t k = 0; k < positions.size(); ++k) {
        ASSERT_EQ(many[k], order.At(1, positions[k])) << n << " " << k;
      }
      const std::vector<uint64_t> outside = {n};
      EXPECT_THROW(order.AtMany(1, outside, many.data()), Error);
    }
  }
}

TEST(SampleOrder, NoneKeepsTheDatasetOrder) {
  const SampleOrder order(100, {.mode = ShuffleMode::kNone, .seed = 5});
  EXPECT_EQ(Epoch(order, 0), Iota(100));
  EXPECT_EQ(Epoch(order, 7), Iota(100));
}

TEST(SampleOrder, IsAPureFunctionOfSeedEpochAndPosition) {
  const uint64_t n = 4097;
  for (const auto& options : AllModes(42)) {
    if (options.mode == ShuffleMode::kNone) continue;
    const auto base = Epoch(SampleOrder(n, options), 3);
    EXPECT_EQ(Epoch(SampleOrder(n, options), 3), base);
    SampleOrderOptions reseeded = options;
    reseeded.seed = 43;
    EXPECT_GT(CountDifferent(base, Epoch(SampleOrder(n, options), 4)), n * 9 / 10);
    EXPECT_GT(CountDifferent(base, Epoch(SampleOrder(n, reseeded), 3)), n * 9 / 10);
  }
}

// A uniformly random permutation of n has mean |perm(i) - i| = (n^2 - 1) /
// (3n), about n / 3, about one fixed point, and an ascent
// (perm(i + 1) > perm(i)) at about half the positions.
TEST(SampleOrder, GlobalShuffleLooksUniform) {
  const uint64_t n = 100000;
  const auto order = Epoch(SampleOrder(n, {.mode = ShuffleMode::kGlobal, .seed = 1}), 0);
  double displacement = 0;
  uint64_t fixed_points = 0, ascents = 0;
  for (uint64_t i = 0; i < n; ++i) {
    displacement += std::abs(static_cast<double>(order[i]) - static_cast<double>(i));
    fixed_points += order[i] == i;
    if (i + 1 < n) ascents += order[i + 1] > order[i];
  }
  EXPECT_NEAR(displacement / n / n, 1.0 / 3.0, 0.01);
  EXPECT_LT(fixed_points, 10u);
  EXPECT_NEAR(static_cast<double>(ascents) / (n - 1), 0.5, 0.01);
}

// The block-mode property: walking an epoch in order, a block is "open"
// from the first to the last position holding one of its samples. At most
// window_blocks blocks are open at any position, and each block's samples
// lie within window_blocks * block_size consecutive positions. With
// window_blocks == 1 each block is exactly one contiguous run.
void ExpectBlockLocality(uint64_t n, uint64_t block_size, uint64_t window_blocks) {
  const SampleOrder order(n, {.mode = ShuffleMode::kBlock,
                              .seed = 9,
                              .block_size = block_size,
                              .window_blocks = window_blocks});
  const auto samples = Epoch(order, 2);
  const uint64_t num_blocks = (n + block_size - 1) / block_size;
  std::vector<uint64_t> first(num_blocks, n), last(num_blocks, 0);
  for (uint64_t p = 0; p < n; ++p) {
    const uint64_t block = samples[p] / block_size;
    first[block] = std::min(first[block], p);
    last[block] = p;
  }
  std::vector<int> open_delta(n + 1, 0);
  for (uint64_t k = 0; k < num_blocks; ++k) {
    EXPECT_LT(last[k] - first[k], window_blocks * block_size) << "block " << k;
    if (window_blocks == 1) {
      EXPECT_EQ(last[k] - first[k] + 1, std::min(block_size, n - k * block_size)) << "block " << k;
    }
    ++open_delta[first[k]];
    --open_delta[last[k] + 1];
  }
  int open = 0, max_open = 0;
  for (uint64_t p = 0; p < n; ++p) max_open = std::max(max_open, open += open_delta[p]);
  EXPECT_LE(static_cast<uint64_t>(max_open), window_blocks);
}

TEST(SampleOrder, BlockModeKeepsBlocksWithinOneWindow) {
  ExpectBlockLocality(1000, 7, 3);   // short last block and short last window
  ExpectBlockLocality(4097, 64, 4);  // a one-sample block
  ExpectBlockLocality(1000, 10, 1);  // blocks only: each block contiguous
  ExpectBlockLocality(1000, 7, 1);
}

TEST(SampleOrder, BlockModeShufflesBlocksAndSamplesWithinWindows) {
  const SampleOrderOptions options = {
      .mode = ShuffleMode::kBlock, .seed = 3, .block_size = 32, .window_blocks = 4};
  const SampleOrder order(4096, options);
  std::set<uint64_t> first_blocks;
  for (uint64_t epoch = 0; epoch < 8; ++epoch) first_blocks.insert(order.At(epoch, 0) / 32);
  EXPECT_GT(first_blocks.size(), 4u);  // the first window is not always blocks 0-3
  const auto samples = Epoch(order, 0);
  uint64_t successors = 0;
  for (size_t p = 0; p + 1 < samples.size(); ++p) successors += samples[p + 1] == samples[p] + 1;
  EXPECT_LT(successors, samples.size() / 20);  // samples inside a window are mixed
}

TEST(SampleOrder, RejectsBadArguments) {
  EXPECT_THROW(SampleOrder(0, {}), Error);
  EXPECT_THROW(SampleOrder(10, {.block_size = 0}), Error);
  EXPECT_THROW(SampleOrder(10, {.window_blocks = 0}), Error);
  const SampleOrder order(10, {.mode = ShuffleMode::kGlobal});
  EXPECT_THROW(order.At(0, 10), Error);
  try {
    SampleOrder(0, {});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
  }
}

TEST(ShuffleMode, ParsesTheConfigNames) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kGlobal}) {
    EXPECT_EQ(ParseShuffleMode(ShuffleModeName(mode)), mode);
  }
  EXPECT_STREQ(ShuffleModeName(ShuffleMode::kBlock), "block");
  try {
    ParseShuffleMode("globl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "pipeline.shuffle");
    EXPECT_THAT(e.Message(), HasSubstr("\"pipeline.shuffle\": unknown shuffle mode \"globl\""));
    EXPECT_THAT(e.hint(), HasSubstr("none, block, global"));
  }
}

// ---- Rank partitioning -----------------------------------------------------

TEST(RankSlice, SlicesTileTheGlobalBatch) {
  for (int world : {1, 2, 4, 8}) {
    uint64_t next = 0;
    for (int rank = 0; rank < world; ++rank) {
      const BatchSlice slice = RankSlice(64, rank, world);
      EXPECT_EQ(slice.begin, next);
      EXPECT_EQ(slice.size(), 64u / world);
      next = slice.end;
    }
    EXPECT_EQ(next, 64u);
  }
}

// Samples of global batch b as the ranks of a world of `world` take them.
std::vector<std::vector<uint64_t>> BatchesAtWorldSize(const SampleOrder& order, uint64_t global,
                                                      int world) {
  std::vector<std::vector<uint64_t>> batches;
  for (uint64_t b = 0; b < BatchesPerEpoch(order.size(), global, false); ++b) {
    std::vector<uint64_t> batch;
    for (int rank = 0; rank < world; ++rank) {
      const BatchSlice slice = RankSlice(global, rank, world);
      for (uint64_t p = b * global + slice.begin; p < b * global + slice.end; ++p) {
        if (p < order.size()) batch.push_back(order.At(5, p));
      }
    }
    batches.push_back(Sorted(batch));
  }
  return batches;
}

TEST(RankSlice, EveryWorldSizeSeesTheSameGlobalBatches) {
  const SampleOrder order(1000, {.mode = ShuffleMode::kGlobal, .seed = 11});
  const auto reference = BatchesAtWorldSize(order, 64, 1);
  ASSERT_EQ(reference.size(), 16u);
  EXPECT_EQ(reference.back().size(), 1000u % 64);
  for (int world : {2, 4, 8}) EXPECT_EQ(BatchesAtWorldSize(order, 64, world), reference) << world;
}

TEST(RankSlice, IndivisibleBatchesAndBadRanksAreErrors) {
  try {
    RankSlice(100, 0, 8);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_THAT(e.hint(), HasSubstr("pipeline.batch_size"));
    EXPECT_THAT(e.hint(), HasSubstr("multiple of 8"));
    EXPECT_THAT(e.hint(), HasSubstr("96 or 104"));
  }
  EXPECT_THROW(RankSlice(0, 0, 1), Error);
  EXPECT_THROW(RankSlice(64, 4, 4), Error);
  EXPECT_THROW(RankSlice(64, -1, 4), Error);
  EXPECT_THROW(RankSlice(64, 0, 0), Error);
}

TEST(BatchesPerEpoch, DropLastRoundsDown) {
  EXPECT_EQ(BatchesPerEpoch(1000, 64, true), 15u);
  EXPECT_EQ(BatchesPerEpoch(1000, 64, false), 16u);
  EXPECT_EQ(BatchesPerEpoch(1024, 64, true), 16u);
  EXPECT_EQ(BatchesPerEpoch(1024, 64, false), 16u);
  EXPECT_EQ(BatchesPerEpoch(3, 64, true), 0u);
  EXPECT_EQ(BatchesPerEpoch(3, 64, false), 1u);
  EXPECT_THROW(BatchesPerEpoch(3, 0, false), Error);
}

}  // namespace
}  // namespace topspin
