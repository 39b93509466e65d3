#include "topspin/model/rank_metrics.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

using V = std::vector<float>;

TEST(RankMetrics, HandComputedList) {
  const V scores = {3, 2, 1}, labels = {0, 1, 2};
  // Ranked gains 0, 1, 3; ideal 3, 1, 0; discounts 1, 1/log2(3), 1/2.
  const double dcg = 1 / std::log2(3.0) + 3.0 / 2, idcg = 3 + 1 / std::log2(3.0);
  EXPECT_NEAR(NdcgAt(scores, labels, 3), dcg / idcg, 1e-12);
  EXPECT_NEAR(NdcgAt(scores, labels, 0), dcg / idcg, 1e-12);   // whole list
  EXPECT_NEAR(NdcgAt(scores, labels, 10), dcg / idcg, 1e-12);  // k past the end
  EXPECT_EQ(NdcgAt(scores, labels, 1), 0);
  EXPECT_NEAR(NdcgAt(scores, labels, 2), (1 / std::log2(3.0)) / (3 + 1 / std::log2(3.0)), 1e-12);
  // Relevant at ranks 2 and 3: (1/2 + 2/3) / 2.
  EXPECT_NEAR(AveragePrecisionAt(scores, labels, 10), (0.5 + 2.0 / 3) / 2, 1e-12);
  EXPECT_NEAR(AveragePrecisionAt(scores, labels, 2), 0.5 / 2, 1e-12);
  EXPECT_EQ(ReciprocalRank(scores, labels), 0.5);
}

TEST(RankMetrics, TiesKeepInputOrder) {
  const V scores = {1, 1, 1}, labels = {0, 0, 3};
  EXPECT_NEAR(NdcgAt(scores, labels, 3), (7.0 / 2) / 7.0, 1e-12);  // the 3 lands at rank 3
  EXPECT_NEAR(ReciprocalRank(scores, labels), 1.0 / 3, 1e-12);
  EXPECT_NEAR(AveragePrecisionAt(scores, labels, 3), 1.0 / 3, 1e-12);
}

TEST(RankMetrics, NoRelevantDocumentAndSingleItems) {
  EXPECT_EQ(NdcgAt(V{0.5f, 0.1f}, V{0, 0}, 10), 1);
  EXPECT_EQ(AveragePrecisionAt(V{0.5f, 0.1f}, V{0, 0}, 10), 1);
  EXPECT_EQ(ReciprocalRank(V{0.5f, 0.1f}, V{0, 0}), 1);
  EXPECT_EQ(NdcgAt(V{0.2f}, V{2}, 10), 1);
  EXPECT_EQ(NdcgAt(V{0.2f}, V{0}, 10), 1);
  EXPECT_EQ(AveragePrecisionAt(V{0.2f}, V{4}, 1), 1);
  EXPECT_THROW(NdcgAt(V{}, V{}, 10), std::exception);
  EXPECT_THROW(NdcgAt(V{1}, V{1, 2}, 10), std::exception);
}

TEST(RankMetrics, AccumulatorAveragesJaggedBatches) {
  RankMetricAccumulator acc({1, 3});
  const V scores = {3, 2, 1, /* list 2 */ 0.2f, /* list 3 */ 1, 1, 1};
  const V labels = {0, 1, 2, 2, 0, 0, 3};
  const std::vector<int64_t> offsets = {0, 3, 4, 7};
  acc.AddBatch(scores, labels, offsets);
  EXPECT_EQ(acc.lists(), 3u);
  const double first = NdcgAt(V{3, 2, 1}, V{0, 1, 2}, 3);
  EXPECT_NEAR(acc.ndcg(3), (first + 1 + 0.5) / 3, 1e-12);
  EXPECT_NEAR(acc.ndcg(1), (0 + 1 + 0) / 3.0, 1e-12);
  EXPECT_NEAR(acc.mrr(), (0.5 + 1 + 1.0 / 3) / 3, 1e-12);
  EXPECT_THROW(acc.ndcg(10), std::exception);
  EXPECT_NE(acc.Summary().find("ndcg@3"), std::string::npos);
}

}  // namespace
}  // namespace topspin
