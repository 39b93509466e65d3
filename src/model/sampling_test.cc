#include "topspin/model/sampling.h"

#include <cmath>
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

// Draws `n` tokens with uniforms from one seeded stream.
std::map<int64_t, int> Draw(const std::vector<float>& logits, const SamplingOptions& o, int n,
                            uint64_t seed = 1) {
  PhiloxStream rng(seed);
  std::map<int64_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[SampleToken(logits, o, rng.NextDouble())];
  return counts;
}

TEST(Sampling, TemperatureZeroAndTopKOneAreGreedy) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  for (const SamplingOptions o : {SamplingOptions{.temperature = 0}, SamplingOptions{.top_k = 1}}) {
    for (const double u : {0.0, 0.5, 0.999}) EXPECT_EQ(SampleToken(logits, o, u), 1);  // lower id of the tie
  }
}

TEST(Sampling, FollowsTheSoftmaxAtTheTemperature) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  const auto counts = Draw(logits, {}, 40000);
  EXPECT_NEAR(counts.at(1) / 40000.0, 0.75, 0.01);
  // Temperature 2 flattens: p1 = sqrt(3) / (1 + sqrt(3)).
  const auto flat = Draw(logits, {.temperature = 2}, 40000);
  EXPECT_NEAR(flat.at(1) / 40000.0, std::sqrt(3.0) / (1 + std::sqrt(3.0)), 0.01);
  // The inverse CDF at its edges.
  EXPECT_EQ(SampleToken(logits, {}, 0.0), 1);     // the most likely token's interval is first
  EXPECT_EQ(SampleToken(logits, {}, 0.7499), 1);
  EXPECT_EQ(SampleToken(logits, {}, 0.7501), 0);
  EXPECT_EQ(SampleToken(logits, {}, 0.9999999), 0);
}

TEST(Sampling, TopKNeverDrawsOutsideTheKMostLikely) {
  std::vector<float> logits(50);
  PhiloxStream values(9);
  for (float& l : logits) l = float(values.NextNormal());
  std::vector<int64_t> order(50);
  for (int64_t i = 0; i < 50; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  const std::set<int64_t> top5(order.begin(), order.begin() + 5);
  const auto counts = Draw(logits, {.temperature = 3.0, .top_k = 5}, 5000);
  EXPECT_EQ(counts.size(), 5u) << "every one of the 5 is drawn at temperature 3";
  for (const auto& [id, n] : counts) EXPECT_TRUE(top5.contains(id)) << id;
}

TEST(Sampling, TopPKeepsTheSmallestSetThatReachesP) {
  // p = 0.5, 0.3, 0.15, 0.05: top_p 0.8 keeps the first two, renormalised.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  const auto counts = Draw(logits, {.top_p = 0.8}, 40000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts.at(0) / 40000.0, 0.5 / 0.8, 0.01);
  EXPECT_EQ(Draw(logits, {.top_p = 0.4}, 100).size(), 1u);  // the top token alone reaches 0.4
}

TEST(Sampling, NonFiniteLogitsNeverWinAndBadOptionsNameTheirFlag) {
  const std::vector<float> logits = {NAN, -INFINITY, 1.0f, 0.0f};
  const auto counts = Draw(logits, {}, 2000);
  for (const auto& [id, n] : counts) EXPECT_TRUE(id == 2 || id == 3) << id;
  EXPECT_EQ(SampleToken(logits, {.temperature = 0}, 0.5), 2);
  for (const auto& [o, flag] : {std::pair{SamplingOptions{.temperature = -1}, "--temperature"},
                                std::pair{SamplingOptions{.top_k = -2}, "--top-k"},
                                std::pair{SamplingOptions{.top_p = 0}, "--top-p"},
                                std::pair{SamplingOptions{.top_p = 1.5}, "--top-p"}}) {
    try {
      CheckSamplingOptions(o);
      ADD_FAILURE() << flag;
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, flag);
    }
  }
}

}  // namespace
}  // namespace topspin
