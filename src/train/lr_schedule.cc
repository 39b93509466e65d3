#include "topspin/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

LrDecay ParseDecay(const std::string& name) {
  if (name == "constant") return LrDecay::kConstant;
  if (name == "cosine") return LrDecay::kCosine;
  if (name == "linear") return LrDecay::kLinear;
  throw ConfigError(fmt::format("unknown learning-rate schedule \"{}\"", name),
                    ErrorWhere{.field = "optim.schedule"}, "use constant, cosine or linear");
}

void Validate(const OptimConfig& optim, const TrainConfig& train) {
  if (!(optim.lr >= 0)) {
    throw ConfigError(fmt::format("lr must be >= 0, got {}", optim.lr),
                      ErrorWhere{.field = "optim.lr"}, "set optim.lr to the peak learning rate");
  }
  if (!(optim.min_lr_ratio >= 0 && optim.min_lr_ratio <= 1)) {
    throw ConfigError(fmt::format("min_lr_ratio must be in [0, 1], got {}", optim.min_lr_ratio),
                      ErrorWhere{.field = "optim.min_lr_ratio"},
                      "the final rate is min_lr_ratio * lr; 0.1 is common");
  }
  if (train.steps < 1) {
    throw ConfigError(fmt::format("steps must be >= 1, got {}", train.steps),
                      ErrorWhere{.field = "train.steps"}, "set train.steps to the optimizer steps");
  }
  if (optim.warmup_steps < 0 || optim.warmup_steps >= train.steps) {
    throw ConfigError(
        fmt::format("warmup_steps ({}) must be at least 0 and less than train.steps ({})",
                    optim.warmup_steps, train.steps),
        ErrorWhere{.field = "optim.warmup_steps"},
        "lower optim.warmup_steps or raise train.steps; a few percent of the steps is common");
  }
}

}  // namespace

LrSchedule::LrSchedule(const OptimConfig& optim, const TrainConfig& train)
    : decay_(ParseDecay(optim.schedule)) {
  Validate(optim, train);
  peak_lr_ = optim.lr;
  min_lr_ = decay_ == LrDecay::kConstant ? optim.lr : optim.min_lr_ratio * optim.lr;
  warmup_steps_ = optim.warmup_steps;
  total_steps_ = train.steps;
}

LrSchedule LrSchedule::From(const Config& config) {
  try {
    return LrSchedule(OptimConfig::From(config), TrainConfig::From(config));
  } catch (const Error& e) {
    throw config.Locate(e);
  }
}

double LrSchedule::Progress(int64_t step) const {
  const int64_t peak_step = std::max<int64_t>(warmup_steps_ - 1, 0);
  const int64_t span = total_steps_ - 1 - peak_step;
  if (span == 0) return step > peak_step ? 1.0 : 0.0;
  const double p = static_cast<double>(step - peak_step) / static_cast<double>(span);
  return std::clamp(p, 0.0, 1.0);
}

double LrSchedule::At(int64_t step) const {
  if (step < 0) throw InternalError(fmt::format("LrSchedule::At: negative step {}", step));
  if (step < warmup_steps_) {
    // The fraction first, so that step W - 1 gives exactly peak_lr_.
    return peak_lr_ * (static_cast<double>(step + 1) / static_cast<double>(warmup_steps_));
  }
  const double p = Progress(step);
  switch (decay_) {
    case LrDecay::kConstant: return peak_lr_;
    // std::lerp is exact at both ends: peak at p = 0, min at p = 1.
    case LrDecay::kCosine:
      return std::lerp(min_lr_, peak_lr_, 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
    case LrDecay::kLinear: return std::lerp(peak_lr_, min_lr_, p);
  }
  throw InternalError("LrSchedule::At: unknown decay");
}

}  // namespace topspin
