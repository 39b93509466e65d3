#include "topspin/model/gpt.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

GptShape Tiny(bool tied = true) {
  return GptShape{.vocab = 37, .context = 12, .layers = 2, .d_model = 16, .heads = 4,
                  .tied_embeddings = tied};
}

int64_t Count(Gpt& gpt) {
  int64_t n = 0;
  for (const auto& p : gpt.module().parameters()) n += p.numel();
  return n;
}

TEST(Gpt, HasExactlyTheParametersThePlannerCounts) {
  for (bool tied : {true, false}) {
    Gpt gpt(Tiny(tied), 1);
    EXPECT_EQ(Count(gpt), ParameterCount(Tiny(tied))) << "tied " << tied;
  }
  GptShape bad = Tiny();
  bad.heads = 5;  // does not divide d_model
  EXPECT_THROW(Gpt(bad, 1), Error);
}

// Every speed-up switch computes the same function: logits and gradients
// of the fused path (SDPA is_causal, LibTorch's LayerNorm and GELU) and of
// each other path agree to float rounding, for either GELU.
TEST(Gpt, EveryKernelChoiceComputesTheSameModel) {
  using A = GptKernels::Attention;
  for (const bool tanh : {false, true}) {
    GptShape shape = Tiny();
    shape.gelu_tanh = tanh;
    Gpt gpt(shape, 4);
    const auto tokens = torch::randint(37, {3, 12}, torch::kLong);
    const auto run = [&](const GptKernels& k) {
      gpt.SetKernels(k);
      for (auto& p : gpt.module().parameters()) p.mutable_grad() = at::Tensor();
      const auto logits = gpt.Logits(tokens);
      logits.pow(2).sum().backward();
      std::vector<at::Tensor> out{logits.detach()};
      for (const auto& p : gpt.module().parameters()) out.push_back(p.grad().clone());
      return out;
    };
    const auto want = run({});
    for (const GptKernels k : {GptKernels{.attention = A::kSdpaMask},
                               GptKernels{.attention = A::kComposed},
                               GptKernels{.fused_ops = false},
                               GptKernels{.attention = A::kComposed, .fused_ops = false}}) {
      const auto got = run(k);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-4, 1e-5))
            << "tanh " << tanh << " attention " << int(k.attention) << " fused_ops "
            << k.fused_ops << " tensor " << i << ": "
            << (got[i] - want[i]).abs().max().item<double>();
      }
    }
    gpt.SetKernels({});
  }
  // The tanh GELU is a different function.
  GptShape exact = Tiny(), tanh = Tiny();
  tanh.gelu_tanh = true;
  const auto tokens = torch::randint(37, {1, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::allclose(Gpt(exact, 5).Logits(tokens), Gpt(tanh, 5).Logits(tokens), 0, 1e-7));
}

TEST(Gpt, IsCausal) {
  Gpt gpt(Tiny(), 2);
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(37, {2, 12}, torch::kLong);
  auto changed = tokens.clone();
  changed.select(1, 7).copy_((tokens.select(1, 7) + 1).remainder(37));
  const auto a = gpt.Logits(tokens), b = gpt.Logits(changed);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, 12, 37}));
  // Positions before the change see none of it; the changed one does.
  EXPECT_TRUE(torch::equal(a.narrow(1, 0, 7), b.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(a.select(1, 7), b.select(1, 7)));
  // A prefix alone gives the prefix's logits.
  EXPECT_TRUE(torch::allclose(gpt.Logits(tokens.narrow(1, 0, 5)), a.narrow(1, 0, 5), 1e-5, 1e-6));
  EXPECT_THROW(gpt.Logits(torch::zeros({1, 13}, torch::kLong)), Error);
}

TEST(Gpt, DecodingWithTheKvCacheGivesTheFullForwardsLogits) {
  Gpt gpt(Tiny(false), 4);
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(37, {2, 12}, torch::kLong);
  const auto full = gpt.Logits(tokens);
  // A prompt of 5, then one token at a time; and 5 + a block of 4 + 3.
  for (const std::vector<int64_t>& steps : {std::vector<int64_t>{5, 1, 1, 1, 1, 1, 1, 1},
                                            std::vector<int64_t>{5, 4, 3}}) {
    Gpt::KvCache cache;
    int64_t at = 0;
    for (const int64_t t : steps) {
      const auto logits = gpt.Extend(tokens.narrow(1, at, t), cache);
      EXPECT_TRUE(torch::allclose(logits, full.narrow(1, at, t), 1e-5, 1e-5)) << "at " << at;
      at += t;
    }
    EXPECT_EQ(cache.length, 12);
    EXPECT_EQ(cache.keys[0].size(2), 12);
    EXPECT_THROW(gpt.Extend(tokens.narrow(1, 0, 1), cache), Error);  // past the context
  }
}

TEST(Gpt, StartsNearUniformAndLearnsASequence) {
  Gpt gpt(Tiny(), 3);
  // A cycle 0, 1, ..., 36, 0, ...: each token predicts the next.
  const auto windows = torch::arange(13, torch::kLong).unsqueeze(0).repeat({8, 1}) +
                       torch::arange(8, torch::kLong).unsqueeze(1) * 4;
  const auto cycle = windows.remainder(37);
  const double tokens = 8.0 * 12;
  const double initial = gpt.LossSum(cycle).item<double>() / tokens;
  EXPECT_NEAR(initial, std::log(37.0), 0.3);  // small initial weights: near uniform
  torch::optim::AdamW opt(gpt.module().parameters(), torch::optim::AdamWOptions(1e-2));
  double loss = initial;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    auto l = gpt.LossSum(cycle) / tokens;
    l.backward();
    opt.step();
    loss = l.item<double>();
  }
  EXPECT_LT(loss, 0.2 * initial);
}

// Records the brackets Logits puts around each unit.
struct Recorder : Gpt::UnitHooks {
  std::vector<std::string> calls;
  void Before(size_t unit) override { calls.push_back("+" + std::to_string(unit)); }
  at::Tensor After(size_t unit, const at::Tensor& output) override {
    calls.push_back("-" + std::to_string(unit));
    return output;
  }
};

TEST(Gpt, UnitsCoverEveryParameterOnceAndAreBracketedInOrder) {
  GptShape shape = Tiny();
  shape.layers = 3;
  Gpt gpt(shape, 4);
  const auto units = gpt.Units(2);
  ASSERT_EQ(units.size(), 3u);  // the ends, blocks {0, 1}, block {2}
  std::set<const void*> seen;
  int64_t n = 0;
  for (const auto& unit : units) {
    for (const auto& p : unit) {
      EXPECT_TRUE(seen.insert(p.unsafeGetTensorImpl()).second);
      n += p.numel();
    }
  }
  EXPECT_EQ(n, ParameterCount(shape));
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(37, {2, 12}, torch::kLong);
  const auto plain = gpt.Logits(tokens);
  Recorder hooks;
  gpt.SetUnitHooks(&hooks, 2);
  EXPECT_TRUE(torch::equal(gpt.Logits(tokens), plain));
  EXPECT_EQ(hooks.calls, (std::vector<std::string>{"+0", "+1", "-1", "+2", "-2", "-0"}));
}

}  // namespace
}  // namespace topspin
