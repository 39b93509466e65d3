#include "topspin/train/lr_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 1e-3;
constexpr double kMin = 0.1 * kLr;

LrSchedule Make(const std::string& schedule, int64_t warmup, int64_t steps,
                double min_lr_ratio = 0.1) {
  OptimConfig optim{.name = "adamw",
                    .lr = kLr,
                    .schedule = schedule,
                    .warmup_steps = warmup,
                    .min_lr_ratio = min_lr_ratio};
  return LrSchedule(optim, TrainConfig{.steps = steps});
}

// Strictly decreasing over [from, to].
void ExpectDecays(const LrSchedule& s, int64_t from, int64_t to) {
  for (int64_t step = from + 1; step <= to; ++step) {
    ASSERT_LT(s.At(step), s.At(step - 1)) << "step " << step;
  }
}

TEST(LrSchedule, WarmupRisesLinearlyFromLrOverWarmupToLr) {
  const LrSchedule s = Make("cosine", 10, 100);
  EXPECT_DOUBLE_EQ(s.At(0), kLr / 10);
  EXPECT_DOUBLE_EQ(s.At(4), kLr * 5 / 10);
  EXPECT_EQ(s.At(9), kLr);  // the peak, exactly
  for (int64_t step = 1; step < 10; ++step) EXPECT_GT(s.At(step), s.At(step - 1));
}

TEST(LrSchedule, CosineDecaysToTheMinimumAtTheLastStepAndStaysThere) {
  const LrSchedule s = Make("cosine", 10, 100);
  EXPECT_DOUBLE_EQ(s.min_lr(), kMin);
  ExpectDecays(s, 9, 99);
  EXPECT_EQ(s.At(99), s.min_lr());
  EXPECT_GT(s.At(98), s.min_lr());
  EXPECT_EQ(s.At(100), s.min_lr());
  EXPECT_EQ(s.At(1'000'000), s.min_lr());
}

TEST(LrSchedule, CosineMidpointIsHalfwayBetweenPeakAndMinimum) {
  // Peak at step 9, minimum at step 109: the midpoint is step 59.
  const LrSchedule s = Make("cosine", 10, 110);
  EXPECT_DOUBLE_EQ(s.At(59), (kLr + kMin) / 2);
  // Cosine stays above the straight line in the first half.
  EXPECT_GT(s.At(34), kLr - 0.25 * (kLr - kMin));
}

TEST(LrSchedule, LinearDecayIsAStraightLine) {
  const LrSchedule s = Make("linear", 10, 110);
  EXPECT_EQ(s.At(9), kLr);
  EXPECT_DOUBLE_EQ(s.At(34), kLr - 0.25 * (kLr - kMin));
  EXPECT_DOUBLE_EQ(s.At(59), (kLr + kMin) / 2);
  EXPECT_EQ(s.At(109), kMin);
  EXPECT_EQ(s.At(500), kMin);
  ExpectDecays(s, 9, 109);
}

TEST(LrSchedule, ConstantHoldsThePeakAfterWarmup) {
  const LrSchedule s = Make("constant", 4, 20);
  EXPECT_DOUBLE_EQ(s.At(0), kLr / 4);
  for (int64_t step = 3; step < 30; ++step) EXPECT_EQ(s.At(step), kLr) << step;
  EXPECT_EQ(s.min_lr(), kLr);
}

TEST(LrSchedule, WithoutWarmupStepZeroRunsAtThePeak) {
  const LrSchedule none = Make("cosine", 0, 50);
  const LrSchedule one = Make("cosine", 1, 50);
  EXPECT_EQ(none.At(0), kLr);
  EXPECT_EQ(none.At(49), kMin);
  for (int64_t step = 0; step < 60; ++step) EXPECT_EQ(none.At(step), one.At(step)) << step;
  const LrSchedule single = Make("linear", 0, 1, 0.0);
  EXPECT_EQ(single.At(0), kLr);
  EXPECT_EQ(single.At(1), 0.0);
}

TEST(LrSchedule, WarmupAsLongAsTheRunIsAConfigError) {
  try {
    Make("cosine", 100, 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "optim.warmup_steps");
    EXPECT_THAT(e.hint(), HasSubstr("optim.warmup_steps"));
    EXPECT_THAT(e.Message(), HasSubstr("less than train.steps (100)"));
  }
}

TEST(LrSchedule, BadInputsNameTheirField) {
  try {
    Make("step", 0, 10);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "optim.schedule");
  }
  try {
    Make("cosine", 0, 10).At(-1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  }
}

TEST(LrSchedule, BuildsFromAParsedConfig) {
  const Config c = Config::Parse(
      "optim:\n  lr: 0.01\n  schedule: linear\n  warmup_steps: 5\n  min_lr_ratio: 0\n"
      "train:\n  steps: 25\n",
      "t.yaml", {}, TopspinSchema());
  const LrSchedule s(OptimConfig::From(c), TrainConfig::From(c));
  EXPECT_EQ(s.decay(), LrDecay::kLinear);
  EXPECT_DOUBLE_EQ(s.At(0), 0.002);
  EXPECT_EQ(s.At(4), 0.01);
  EXPECT_DOUBLE_EQ(s.At(14), 0.005);
  EXPECT_EQ(s.At(24), 0.0);
  const LrSchedule from = LrSchedule::From(c);
  EXPECT_EQ(from.At(14), s.At(14));
  EXPECT_EQ(from.total_steps(), 25);
}

TEST(LrSchedule, ConfigErrorsPointAtTheLineThatSetWarmup) {
  const Config c = Config::Parse("train:\n  steps: 50\noptim:\n  warmup_steps: 50\n", "t.yaml", {},
                                 TopspinSchema());
  try {
    LrSchedule::From(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_THAT(e.Message(), HasSubstr("t.yaml:4: \"optim.warmup_steps\": warmup_steps (50)"));
  }
}

}  // namespace
}  // namespace topspin
