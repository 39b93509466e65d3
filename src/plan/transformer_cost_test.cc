#include "topspin/plan/transformer_cost.h"

#include <gtest/gtest.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

GptShape Gpt2Small() {
  return {.vocab = 50257, .context = 1024, .layers = 12, .d_model = 768, .heads = 12};
}

// Runs `fn`, expects a config Error naming `field`.
template <typename F>
void ExpectConfigError(F&& fn, const std::string& field) {
  try {
    fn();
    ADD_FAILURE() << "expected a config error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.Message();
    EXPECT_EQ(e.where().field, field) << e.Message();
    EXPECT_FALSE(e.hint().empty()) << e.Message();
  }
}

TEST(TransformerCost, ParameterCountMatchesPublishedGpt2Sizes) {
  EXPECT_EQ(Gpt2Small().d_ff, 3072);
  EXPECT_EQ(ParameterCount(Gpt2Small()), 124'439'808);
  // Hugging Face's gpt2-medium and gpt2-xl.
  EXPECT_EQ(
      ParameterCount({.vocab = 50257, .context = 1024, .layers = 24, .d_model = 1024, .heads = 16}),
      354'823'168);
  EXPECT_EQ(
      ParameterCount({.vocab = 50257, .context = 1024, .layers = 48, .d_model = 1600, .heads = 25}),
      1'557'611'200);
}

TEST(TransformerCost, UntiedHeadAndMlpWidthChangeTheCount) {
  GptShape untied = Gpt2Small();
  untied.tied_embeddings = false;
  EXPECT_EQ(ParameterCount(untied) - ParameterCount(Gpt2Small()), 50257 * 768);
  GptShape narrow = Gpt2Small();
  narrow.d_ff = 2048;  // 1024 fewer hidden units: 2 * 768 weights + 1 bias each, per layer
  EXPECT_EQ(ParameterCount(Gpt2Small()) - ParameterCount(narrow), 12 * 1024 * (2 * 768 + 1));
}

TEST(TransformerCost, NonEmbeddingCountDropsEmbeddingsAndUntiedHead) {
  const int64_t embeddings = 50257 * 768 + 1024 * 768;
  EXPECT_EQ(NonEmbeddingParameterCount(Gpt2Small()), 124'439'808 - embeddings);
  GptShape untied = Gpt2Small();
  untied.tied_embeddings = false;
  EXPECT_EQ(NonEmbeddingParameterCount(untied), 85'056'000);
}

TEST(TransformerCost, TrainingFlopsFollowKaplan) {
  // 6 * 85,056,000 + 6 * 12 * 1024 * 768
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(Gpt2Small()), 566'959'104.0);
  GptShape longer = Gpt2Small();
  longer.context = 2048;
  longer.vocab = 1000;  // embeddings cost nothing in this convention
  // Only the attention term grows: 6 * layers * (2048 - 1024) * d_model.
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(longer) - TrainingFlopsPerToken(Gpt2Small()),
                   6.0 * 12 * 1024 * 768);
}

TEST(TransformerCost, MfuIsAchievedOverPeak) {
  EXPECT_DOUBLE_EQ(Mfu(1000, 6e9, 1.2e13), 0.5);
  EXPECT_DOUBLE_EQ(Mfu(0, 6e9, 1.2e13), 0.0);
  ExpectConfigError([] { Mfu(1000, 6e9, 0); }, "peak_flops");
  ExpectConfigError([] { Mfu(-1, 6e9, 1e12); }, "tokens_per_s");
  ExpectConfigError([] { Mfu(1, 0, 1e12); }, "flops_per_token");
}

TEST(TransformerCost, ComputeOptimalUsesTwentyTokensPerParameter) {
  const ComputeOptimalSize one_b = ComputeOptimal(1.2e20);  // 6 * 1e9 * 2e10
  EXPECT_DOUBLE_EQ(one_b.parameters, 1e9);
  EXPECT_DOUBLE_EQ(one_b.tokens, 2e10);
  const ComputeOptimalSize chinchilla = ComputeOptimal(5.88e23);
  EXPECT_NEAR(chinchilla.parameters, 70e9, 1.0);
  EXPECT_NEAR(chinchilla.tokens, 1.4e12, 20.0);
  ExpectConfigError([] { ComputeOptimal(0); }, "compute_flops");
}

TEST(TransformerCost, MixedPrecisionAdamNeedsSixteenBytesPerParameter) {
  const MemoryEstimate m = EstimateTrainingMemory({.parameters = 1'000'000'000});
  EXPECT_EQ(m.param_bytes, 2'000'000'000);
  EXPECT_EQ(m.grad_bytes, 2'000'000'000);
  EXPECT_EQ(m.master_bytes, 4'000'000'000);
  EXPECT_EQ(m.optimizer_bytes, 8'000'000'000);
  EXPECT_EQ(m.total_bytes, 16'000'000'000);
  const MemoryEstimate fp32 =
      EstimateTrainingMemory({.parameters = 1'000'000'000, .precision = ParamPrecision::kFp32});
  EXPECT_EQ(fp32.master_bytes, 0);
  EXPECT_EQ(fp32.param_bytes, 4'000'000'000);
  EXPECT_EQ(fp32.total_bytes, 16'000'000'000);
  const MemoryEstimate sgd = EstimateTrainingMemory(
      {.parameters = 10, .precision = ParamPrecision::kFp32, .optimizer_states = 1});
  EXPECT_EQ(sgd.total_bytes, 10 * (4 + 4 + 4));
}

TEST(TransformerCost, ZeroStagesShardOneMorePartEach) {
  MemoryPlan plan{.parameters = 8'000, .world_size = 8};
  const MemoryEstimate z0 = EstimateTrainingMemory(plan);
  EXPECT_EQ(z0.total_bytes, 16 * 8'000);
  plan.zero_stage = 1;
  const MemoryEstimate z1 = EstimateTrainingMemory(plan);
  EXPECT_EQ(z1.param_bytes, z0.param_bytes);
  EXPECT_EQ(z1.grad_bytes, z0.grad_bytes);
  EXPECT_EQ(z1.master_bytes, z0.master_bytes / 8);
  EXPECT_EQ(z1.optimizer_bytes, z0.optimizer_bytes / 8);
  plan.zero_stage = 2;
  const MemoryEstimate z2 = EstimateTrainingMemory(plan);
  EXPECT_EQ(z2.param_bytes, z0.param_bytes);
  EXPECT_EQ(z2.grad_bytes, z0.grad_bytes / 8);
  plan.zero_stage = 3;
  const MemoryEstimate z3 = EstimateTrainingMemory(plan);
  EXPECT_EQ(z3.param_bytes, z0.param_bytes / 8);
  EXPECT_EQ(z3.grad_bytes, z0.grad_bytes / 8);
  EXPECT_EQ(z3.master_bytes, z0.master_bytes / 8);
  EXPECT_EQ(z3.optimizer_bytes, z0.optimizer_bytes / 8);
  EXPECT_EQ(z3.total_bytes, z0.total_bytes / 8);
}

TEST(TransformerCost, ShardsRoundUpToTheLargestRank) {
  const MemoryEstimate m = EstimateTrainingMemory(
      {.parameters = 10, .precision = ParamPrecision::kFp32, .zero_stage = 3, .world_size = 4});
  EXPECT_EQ(m.param_bytes, 3 * 4);
  EXPECT_EQ(m.total_bytes, 3 * 16);
}

TEST(TransformerCost, InvalidInputsNameTheField) {
  ExpectConfigError(
      [] { ParameterCount({.vocab = 0, .context = 8, .layers = 1, .d_model = 8, .heads = 2}); },
      "vocab");
  ExpectConfigError(
      [] { ParameterCount({.vocab = 8, .context = 8, .layers = -1, .d_model = 8, .heads = 2}); },
      "layers");
  ExpectConfigError(
      [] { ParameterCount({.vocab = 8, .context = 8, .layers = 1, .d_model = 8, .heads = 0}); },
      "heads");
  ExpectConfigError(
      [] {
        TrainingFlopsPerToken({.vocab = 8, .context = 8, .layers = 1, .d_model = 768, .heads = 5});
      },
      "d_model");
  ExpectConfigError([] { EstimateTrainingMemory({.parameters = 0}); }, "parameters");
  ExpectConfigError([] { EstimateTrainingMemory({.parameters = 8, .world_size = 0}); },
                    "world_size");
  ExpectConfigError([] { EstimateTrainingMemory({.parameters = 8, .zero_stage = 4}); },
                    "zero_stage");
  ExpectConfigError([] { EstimateTrainingMemory({.parameters = 8, .optimizer_states = -1}); },
                    "optimizer_states");
}

}  // namespace
}  // namespace topspin
