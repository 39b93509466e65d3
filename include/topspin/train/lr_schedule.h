// LrSchedule: the learning rate of every optimizer step, from optim.lr,
// optim.schedule, optim.warmup_steps, optim.min_lr_ratio and train.steps.
//
// With lr the peak, W = warmup_steps, T = steps and min = min_lr_ratio * lr,
// At(step) for a 0-based step is
//   warmup, step < W:   lr * (step + 1) / W
//                       (lr / W at step 0, never 0; exactly lr at step W - 1)
//   after,  step >= W:  constant: lr
//                       cosine:   min + (lr - min) * (1 + cos(pi * p)) / 2
//                       linear:   lr - (lr - min) * p
//   with p = clamp((step - s) / (T - 1 - s), 0, 1) and s = max(W - 1, 0), the
//   step that has the peak. The decay starts at lr after the warmup's last
//   step (no jump), reaches min at step T - 1 and stays there after it.
// W = 0 and W = 1 are the same schedule: step 0 already runs at lr. With
// T = 1 and W = 0 there is nothing to decay over: step 0 runs at lr and
// later steps at min.
//
// Immutable after construction; At() is pure and thread-safe.
#pragma once

#include <cstdint>

#include "topspin/core/config.h"
#include "topspin/core/config_schema.h"

namespace topspin {

enum class LrDecay { kConstant, kCosine, kLinear };

class LrSchedule {
 public:
  // Throws Error{kConfig} naming the field when optim.warmup_steps >=
  // train.steps, or a value is out of range (lr < 0, min_lr_ratio outside
  // [0, 1], steps < 1, an unknown schedule name).
  LrSchedule(const OptimConfig& optim, const TrainConfig& train);

  // As above from a validated Config; errors also carry the file and line
  // that set optim.warmup_steps (or the offending field).
  static LrSchedule From(const Config& config);

  // Learning rate of 0-based `step`; step >= 0 (a negative step throws
  // Error{kInternal}). Steps past T - 1 get the final rate.
  double At(int64_t step) const;

  double peak_lr() const { return peak_lr_; }
  // The final rate: min_lr_ratio * lr, or lr for a constant schedule.
  double min_lr() const { return min_lr_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }
  LrDecay decay() const { return decay_; }

 private:
  // Decay progress p in [0, 1] of a step after the warmup.
  double Progress(int64_t step) const;

  double peak_lr_;
  double min_lr_;
  int64_t warmup_steps_;
  int64_t total_steps_;
  LrDecay decay_;
};

}  // namespace topspin
