#include "topspin/model/rank_losses.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

constexpr RankLoss kAll[] = {RankLoss::kMse,        RankLoss::kBce,     RankLoss::kRankNet,
                             RankLoss::kLambdaRank, RankLoss::kSoftmax, RankLoss::kApproxNdcg};

torch::Tensor D(std::vector<double> v) {
  return torch::tensor(v, torch::kDouble);
}
torch::Tensor Offsets(std::vector<int64_t> v) {
  return torch::tensor(v, torch::kLong);
}

double Loss(RankLoss kind, const torch::Tensor& s, const torch::Tensor& y, const torch::Tensor& o) {
  return RankingLoss(kind, s, y, o).item<double>();
}

TEST(RankLosses, HandComputedValues) {
  const auto o = Offsets({0, 2});
  EXPECT_NEAR(Loss(RankLoss::kMse, D({1, 0}), D({0, 0}), o), 0.5, 1e-12);
  EXPECT_NEAR(Loss(RankLoss::kRankNet, D({1, 0}), D({1, 0}), o), std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(Loss(RankLoss::kSoftmax, D({0, 0}), D({1, 0}), o), std::log(2.0), 1e-12);
  // LambdaRank on a swapped pair: weight |(1 - 0)(1 - 1/log2(3))| / 1.
  EXPECT_NEAR(Loss(RankLoss::kLambdaRank, D({0, 1}), D({1, 0}), o),
              (1 - 1 / std::log2(3.0)) * std::log1p(std::exp(1.0)), 1e-12);
  // ApproxNDCG with well-separated scores is 1 - NDCG of that order.
  EXPECT_NEAR(Loss(RankLoss::kApproxNdcg, D({10, 0}), D({1, 0}), o), 0, 1e-12);
  EXPECT_NEAR(Loss(RankLoss::kApproxNdcg, D({0, 10}), D({1, 0}), o), 1 - 1 / std::log2(3.0), 1e-9);
  EXPECT_NEAR(Loss(RankLoss::kBce, D({0, 0}), D({4, 0}), o), std::log(2.0), 1e-12);
}

TEST(RankLosses, GradientsMatchFiniteDifferences) {
  torch::manual_seed(3);
  const auto o = Offsets({0, 4, 5, 11});  // lists of 4, 1 and 6
  const auto y = D({0, 2, 1, 4, 3, 0, 0, 1, 2, 3, 1});
  const auto base = torch::randn({11}, torch::kDouble);
  for (RankLoss kind : kAll) {
    SCOPED_TRACE(RankLossName(kind));
    auto s = base.clone().requires_grad_(true);
    RankingLoss(kind, s, y, o).backward();
    const auto grad = s.grad();
    const double eps = 1e-6;
    for (int64_t i = 0; i < 11; ++i) {
      auto plus = base.clone(), minus = base.clone();
      plus[i] += eps;
      minus[i] -= eps;
      const double fd = (Loss(kind, plus, y, o) - Loss(kind, minus, y, o)) / (2 * eps);
      EXPECT_NEAR(grad[i].item<double>(), fd, 1e-6 + 1e-5 * std::fabs(fd)) << "document " << i;
    }
    EXPECT_GT(grad.abs().sum().item<double>(), 0);
  }
}

TEST(RankLosses, JaggedEqualsListByList) {
  torch::manual_seed(4);
  const auto s = torch::randn({7}, torch::kDouble);
  const auto y = D({1, 0, 2, 0, 3, 1, 0});
  const auto joint = Offsets({0, 3, 7});
  for (RankLoss kind : {RankLoss::kRankNet, RankLoss::kSoftmax, RankLoss::kApproxNdcg}) {
    const double a = Loss(kind, s.slice(0, 0, 3), y.slice(0, 0, 3), Offsets({0, 3}));
    const double b = Loss(kind, s.slice(0, 3), y.slice(0, 3), Offsets({0, 4}));
    EXPECT_NEAR(Loss(kind, s, y, joint), (a + b) / 2, 1e-12) << RankLossName(kind);
  }
}

// The one-pass softmax of the CPU against the padded reference: the same
// loss and gradient on a jagged batch with empty, single and label-less
// lists, in float and double.
TEST(RankLosses, FusedSoftmaxEqualsThePaddedReference) {
  torch::manual_seed(5);
  const auto o = Offsets({0, 5, 5, 6, 9, 20, 23, 40});
  auto y = torch::randint(0, 5, {40}, torch::kFloat);
  y.slice(0, 20, 23).zero_();  // nothing to learn in list 5
  for (const int64_t i : {0, 5, 6, 9, 23}) y[i] = 2;  // something in every other non-empty list
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto base = (torch::randn({40}) * 3).to(dtype);
    RankLossTerms terms[2];
    torch::Tensor grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      auto s = base.clone().requires_grad_(true);
      terms[fused] = RankingLossTerms(RankLoss::kSoftmax, s, y, o, {.cpu_fused = fused == 1});
      terms[fused].sum.backward();
      grads[fused] = s.grad().to(torch::kDouble);
    }
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    EXPECT_EQ(terms[1].count, terms[0].count);
    EXPECT_EQ(terms[1].count, 5);  // lists 0, 2, 3, 4 and 6
    EXPECT_EQ(terms[1].sum.scalar_type(), dtype);
    EXPECT_NEAR(terms[1].sum.item<double>(), terms[0].sum.item<double>(), tol * 10);
    EXPECT_LT((grads[1] - grads[0]).abs().max().item<double>(), tol);
    EXPECT_EQ(grads[1].slice(0, 20, 23).abs().sum().item<double>(), 0);
    EXPECT_GT(grads[1].abs().sum().item<double>(), 0);
  }
}

// The host's facts of a batch (longest list, lists with a pair, lists with
// a gain) are exactly what the padded losses would read back, and with them
// every loss gives the same sum, count and gradient.
TEST(RankLosses, HostListFactsReplaceTheReadBacks) {
  torch::manual_seed(6);
  const std::vector<int64_t> off = {0, 5, 5, 6, 9, 20, 23, 40};
  auto y = torch::randint(0, 5, {40}, torch::kFloat);
  y.slice(0, 20, 23).fill_(2);  // list 5: a gain, no pair
  y.slice(0, 6, 9).zero_();     // list 3: neither
  const ListFacts f = HostListFacts(y.data_ptr<float>(), off.data(), 7);
  EXPECT_EQ(f.longest, 17);
  const auto o = Offsets(off);
  const auto base = torch::randn({40}, torch::kDouble);
  for (RankLoss kind : kAll) {
    SCOPED_TRACE(RankLossName(kind));
    RankLossTerms terms[2];
    torch::Tensor grads[2];
    for (int known = 0; known < 2; ++known) {
      auto s = base.clone().requires_grad_(true);
      terms[known] =
          RankingLossTerms(kind, s, y, o, {.cpu_fused = false}, known == 1 ? f : ListFacts{});
      terms[known].sum.backward();
      grads[known] = s.grad();
    }
    EXPECT_EQ(terms[1].count, terms[0].count);
    EXPECT_EQ(terms[1].sum.item<double>(), terms[0].sum.item<double>());
    EXPECT_TRUE(torch::equal(grads[1], grads[0]));
    if (kind == RankLoss::kRankNet) {
      EXPECT_EQ(terms[0].count, f.with_pair);
    }
    if (kind == RankLoss::kSoftmax || kind == RankLoss::kApproxNdcg) {
      EXPECT_EQ(terms[0].count, f.with_gain);
    }
  }
  // Labels a float32 gain may round to 0, or negative ones, leave the
  // gain count to the device; NaN never makes a pair.
  const std::vector<int64_t> one = {0, 3};
  for (const float odd : {1e-4f, -1.0f, std::nanf("")}) {
    const std::vector<float> labels = {0, odd, 0};
    const ListFacts g = HostListFacts(labels.data(), one.data(), 1);
    EXPECT_EQ(g.with_gain, -1) << odd;
    EXPECT_EQ(g.with_pair, std::isnan(odd) ? 0 : 1) << odd;
    EXPECT_EQ(g.longest, 3);
  }
}

// Offsets that do not cover the scores exactly are refused with what they
// are, on every loss, instead of a list index left unwritten.
TEST(RankLosses, OffsetsThatDoNotCoverTheScoresAreRefused) {
  const auto s = D({0.3, -1, 2, 0.5, 1});
  const auto y = D({1, 0, 2, 0, 1});
  for (RankLoss kind : kAll) {
    for (const auto& o : {Offsets({0, 2, 4}), Offsets({1, 3, 5}), Offsets({0, 3, 6})}) {
      try {
        (void)RankingLoss(kind, s, y, o);
        FAIL() << RankLossName(kind) << " accepted offsets " << o;
      } catch (const Error& e) {
        EXPECT_NE(e.Message().find("5 scores"), std::string::npos) << e.Message();
      }
    }
  }
}

TEST(RankLosses, NothingToLearnGivesZeroAndNames) {
  const auto o = Offsets({0, 2, 3});
  const auto zeros = D({0, 0, 0});
  for (RankLoss kind : {RankLoss::kRankNet, RankLoss::kSoftmax, RankLoss::kApproxNdcg}) {
    auto s = D({0.3, -1, 2}).requires_grad_(true);
    const auto loss = RankingLoss(kind, s, zeros, o);
    EXPECT_EQ(loss.item<double>(), 0) << RankLossName(kind);
    loss.backward();
    EXPECT_EQ(s.grad().abs().sum().item<double>(), 0);
  }
  EXPECT_EQ(ParseRankLoss("lambdarank"), RankLoss::kLambdaRank);
  try {
    ParseRankLoss("lambda");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("model.loss"), std::string::npos);
    EXPECT_NE(e.Message().find("approx_ndcg"), std::string::npos);
  }
}

}  // namespace
}  // namespace topspin
