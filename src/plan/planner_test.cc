// The memory, time and cluster plans against values computed by hand.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "topspin/core/error.h"
#include "topspin/plan/cluster_plan.h"
#include "topspin/plan/memory_plan.h"
#include "topspin/plan/time_plan.h"

namespace topspin {
namespace {

GptShape Gpt2Small() {
  return {.vocab = 50257, .context = 1024, .layers = 12, .d_model = 768, .heads = 12};
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MemoryPlan, Gpt2SmallPartByPart) {
  const GptMemory m = EstimateGptMemory({.shape = Gpt2Small(), .micro_batch = 8});
  EXPECT_EQ(m.parameters, 124439808);
  EXPECT_EQ(m.param_bytes, 4 * 124439808LL);
  EXPECT_EQ(m.grad_bytes, 4 * 124439808LL);
  EXPECT_EQ(m.optimizer_bytes, 8 * 124439808LL);  // AdamW m and v
  EXPECT_EQ(m.weight_copy_bytes, 0);
  // B x T x d = 8 x 1024 x 768 = 6,291,456; x d_ff = 25,165,824.
  // fp32: 4 x (9 x 6,291,456 + 2 x 25,165,824) per block.
  EXPECT_EQ(m.layer_bytes, 427819008);
  EXPECT_EQ(m.activation_bytes, 12 * 427819008LL);
  // 4 x (2 x 6,291,456 + 2 x 8,192 x 50,257): the vocabulary's share.
  EXPECT_EQ(m.head_bytes, 3343974400LL);
  EXPECT_EQ(m.total_bytes, 16 * 124439808LL + 12 * 427819008LL + 3343974400LL);

  // Recomputing: each block's input (4 x 6,291,456) and one block in full.
  const GptMemory r = EstimateGptMemory({.shape = Gpt2Small(), .micro_batch = 8, .recompute = true});
  EXPECT_EQ(r.layer_bytes_recompute, 25165824);
  EXPECT_EQ(r.activation_bytes, 12 * 25165824LL + 427819008LL);

  // Materialised attention: 8 x 12 heads x 1024^2 fp32 scores per block.
  const GptMemory a =
      EstimateGptMemory({.shape = Gpt2Small(), .micro_batch = 8, .materialised_attention = true});
  EXPECT_EQ(a.layer_bytes, 427819008LL + 4LL * 8 * 12 * 1024 * 1024);

  // bf16 autocast: bf16 copies of the matmul weights (12 x 7,077,888 + the
  // tied head's 50257 x 768), and 38 bytes per B x T x d of activations
  // where fp32 keeps 68.
  const GptMemory b = EstimateGptMemory({.shape = Gpt2Small(), .micro_batch = 8, .bf16 = true});
  EXPECT_EQ(b.weight_copy_bytes, 2 * (12 * 7077888LL + 50257LL * 768));
  EXPECT_EQ(b.layer_bytes, 38 * 6291456LL);
}

TEST(MemoryPlan, ZeroStagesDivideTheStateOverTheRanks) {
  GptMemoryInputs in{.shape = Gpt2Small(), .micro_batch = 8, .world_size = 8};
  const int64_t shard = (124439808 + 7) / 8;  // 15,554,976
  const int64_t block = 7087872;              // one block's parameters
  in.zero_stage = 1;
  GptMemory m = EstimateGptMemory(in);
  EXPECT_EQ(m.param_bytes, 4 * 124439808LL);
  EXPECT_EQ(m.optimizer_bytes, 8 * shard);
  in.zero_stage = 2;
  m = EstimateGptMemory(in);
  EXPECT_EQ(m.grad_bytes, 4 * shard + 4 * block);  // the shard and one block's staging
  in.zero_stage = 3;
  m = EstimateGptMemory(in);
  EXPECT_EQ(m.param_bytes, 4 * shard);
  EXPECT_EQ(m.gathered_bytes, 4 * block);
}

TEST(MemoryPlan, TheLargestMicroBatchFitsAndTheNextDoesNot) {
  const GpuSpec& h100 = FindGpu("H100");
  const GptMemoryInputs in{.shape = Gpt2Small(), .micro_batch = 8};
  const MemoryFit fit = FitOnGpu(in, h100, {});
  EXPECT_NEAR(fit.usable_bytes, 81559.0 * (1 << 20) * 0.9 - 1.5 * (1 << 30), 1);
  ASSERT_EQ(fit.stages.size(), 1u);  // one rank: nothing to shard over
  EXPECT_TRUE(fit.stages[0].fits);
  EXPECT_EQ(fit.recommended_stage, 0);
  const int64_t b = fit.stages[0].largest_micro_batch;
  GptMemoryInputs at = in;
  at.micro_batch = b;
  EXPECT_LE(double(EstimateGptMemory(at).total_bytes), fit.usable_bytes);
  at.micro_batch = b + 1;
  EXPECT_GT(double(EstimateGptMemory(at).total_bytes), fit.usable_bytes);
  EXPECT_TRUE(Has(fit.advice, "fits without sharding")) << fit.advice;

  // GPT-2 1.5B on 8 x A100 40GB at micro-batch 4: the replicated state
  // alone (16 x 1.56e9 = 25 GB) plus activations does not fit; ZeRO does.
  GptMemoryInputs xl{.shape = {.vocab = 50257, .context = 1024, .layers = 48, .d_model = 1600,
                               .heads = 25},
                     .micro_batch = 4, .world_size = 8};
  const MemoryFit f = FitOnGpu(xl, FindGpu("a100-40gb"), {});
  ASSERT_EQ(f.stages.size(), 4u);
  EXPECT_FALSE(f.stages[0].fits);
  EXPECT_GT(f.recommended_stage, 0);
  EXPECT_TRUE(f.stages[f.recommended_stage].fits);
  EXPECT_TRUE(Has(f.advice, "set dist.zero")) << f.advice;
  EXPECT_THROW(FindGpu("h1000"), Error);
}

TEST(TimePlan, Gpt2SmallOnEightH100s) {
  TimePlanInputs in{.shape = Gpt2Small(), .tokens = 1e10, .gpus = 8, .gpu = FindGpu("h100"),
                    .mfu = 0.4, .step_tokens = 524288};
  const TimePlan p = PlanTrainingTime(in);
  // 6 x 85,056,000 non-embedding parameters + 6 x 12 x 1024 x 768.
  EXPECT_DOUBLE_EQ(p.flops_per_token, 566959104.0);
  EXPECT_NEAR(p.compute_s_per_step, 566959104.0 * 524288 / (8 * 989.4e12 * 0.4), 1e-12);
  EXPECT_DOUBLE_EQ(p.comm_bytes_per_step, 2.0 * 7 / 8 * 4 * 124439808);
  EXPECT_EQ(p.link, "NVLink");
  EXPECT_NEAR(p.comm_s_per_step, p.comm_bytes_per_step / 450e9, 1e-15);
  EXPECT_EQ(p.exposed_comm_s_per_step, 0);  // hidden under the backward
  EXPECT_FALSE(p.comm_bound);
  EXPECT_NEAR(p.seconds, 1e10 / 524288 * p.compute_s_per_step, 1e-6);
  EXPECT_NEAR(p.gpu_hours, p.seconds * 8 / 3600, 1e-9);

  // 64 A100s over 200 Gb/s with small steps: the all-reduce outlasts compute.
  in.gpus = 64;
  in.gpu = FindGpu("a100");
  in.step_tokens = 65536;
  const TimePlan slow = PlanTrainingTime(in);
  EXPECT_EQ(slow.link, "network");
  EXPECT_TRUE(slow.comm_bound);
  EXPECT_NEAR(slow.exposed_comm_s_per_step,
              2.0 * 63 / 64 * 4 * 124439808 / 25e9 - slow.compute_s_per_step * 2 / 3, 1e-12);
  in.zero_stage = 3;
  EXPECT_DOUBLE_EQ(PlanTrainingTime(in).comm_bytes_per_step, 3.0 * 63 / 64 * 4 * 124439808);
  in.mfu = 1.5;
  EXPECT_THROW(PlanTrainingTime(in), Error);
}

TEST(TimePlan, ClusterOptimalMeetsTheDataAndMemoryLimits) {
  ClusterOptimalInputs in{.gpus = 1024, .gpu = FindGpu("h100"), .mfu = 0.4, .hours = 720};
  ClusterOptimal c = PlanClusterOptimal(in);
  EXPECT_NEAR(c.compute, 1024 * 989.4e12 * 0.4 * 720 * 3600, 1e9);
  EXPECT_TRUE(c.limited_by.empty());
  EXPECT_DOUBLE_EQ(c.cluster_optimal.parameters, c.compute_optimal.parameters);

  // A trillion tokens of data: a larger model spends the same FLOPs.
  in.max_tokens = 1e12;
  c = PlanClusterOptimal(in);
  EXPECT_EQ(c.limited_by, "data");
  EXPECT_DOUBLE_EQ(c.cluster_optimal.tokens, 1e12);
  EXPECT_NEAR(6 * c.cluster_optimal.parameters * c.cluster_optimal.tokens / c.compute, 1, 1e-12);
  EXPECT_GT(c.cluster_optimal.parameters, c.compute_optimal.parameters);
  EXPECT_GT(c.cluster_optimal.loss, c.compute_optimal.loss);

  // 8 L4s for a long time: the optimal model's state does not fit.
  ClusterOptimalInputs small{.gpus = 8, .gpu = FindGpu("l4"), .mfu = 0.4, .hours = 10000};
  c = PlanClusterOptimal(small);
  EXPECT_EQ(c.limited_by, "memory");
  EXPECT_NEAR(c.max_parameters, 0.8 * 23034.0 * (1 << 20) * 8 / 16, 1);
  EXPECT_DOUBLE_EQ(c.cluster_optimal.parameters, c.max_parameters);
  EXPECT_GT(c.cluster_optimal.tokens_per_parameter, c.compute_optimal.tokens_per_parameter);
}

TEST(ClusterPlan, TheWorkedExample) {
  // docs/PLANNING.md: 500 GB on 10 nodes of 8 cores and 32 GB.
  ClusterPlanInputs in{.data_bytes = ParseDataSize("500GB", "--data"), .nodes = 10, .cores = 8,
                       .memory_bytes = ParseDataSize("32GB", "--memory")};
  const ClusterPlan p = PlanCluster(in);
  EXPECT_EQ(p.partitions, 4000);
  EXPECT_EQ(p.slots, 80);
  EXPECT_EQ(p.waves, 50);
  EXPECT_DOUBLE_EQ(p.shuffle_bytes_per_node, 150.0 * (1 << 30));
  EXPECT_TRUE(p.spills);
  EXPECT_EQ(p.nodes_without_spill, 47);  // ceil(1500 / 32)
  EXPECT_NEAR(p.seconds, 50 * 128.0 * (1 << 20) / kReferenceCoreBytesPerS, 1e-6);
  EXPECT_TRUE(Has(p.recommendation, "scale out to 47 nodes")) << p.recommendation;

  in.tasks_per_core = 3;
  const ClusterPlan three = PlanCluster(in);
  EXPECT_EQ(three.waves, 50);  // the cores are the same
  bool said = false;
  for (const auto& n : three.notes) said |= Has(n, "240 tasks") && Has(n, "(17 waves)");
  EXPECT_TRUE(said);

  EXPECT_DOUBLE_EQ(ParseDataSize("1.5TiB", "x"), 1.5 * 1024 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseDataSize("64m", "x"), 64.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseDataSize("1000", "x"), 1000);
  try {
    ParseDataSize("lots", "--data");
    FAIL() << "\"lots\" was read as a size";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "--data");
  }
  in.nodes = 0;
  EXPECT_THROW(PlanCluster(in), Error);
}

}  // namespace
}  // namespace topspin
