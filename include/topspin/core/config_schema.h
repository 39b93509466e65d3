// topspin's config schema: every key, its type, default and range, in one
// place (src/core/config_schema.cc). docs/CONFIG.md is generated from it by
// `topspin config schema --markdown` and checked by a test.
//
// Each section also has a typed struct, read once from a validated Config.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/core/config.h"

namespace topspin {

const Schema& TopspinSchema();

// MLP widths written "128,64" (spaces allowed; "" is none): each a positive
// integer up to 2^20. Throws Error{kConfig} naming the bad piece.
std::vector<int64_t> ParseLayerWidths(std::string_view text);

struct RunConfig {
  std::string name;  // run.name
  int64_t seed;      // run.seed
  std::string dir;   // run.dir
  std::string log_level;
  double progress_interval_s;
  static RunConfig From(const Config& config);
};

struct DataConfig {
  std::string train;  // dataset directory
  std::string valid;  // dataset directory, may be empty
  static DataConfig From(const Config& config);
};

struct PipelineConfig {
  int64_t threads;
  int64_t prefetch;
  int64_t batch_size;
  std::string shuffle;  // none | block | global
  bool drop_last;
  bool pinned_memory;
  int64_t window_blocks;
  std::vector<std::string> dense;   // feature chains (topspin/pipeline/transform.h)
  std::vector<std::string> sparse;
  std::string on_error;  // fail | skip
  int64_t cache_mib;
  static PipelineConfig From(const Config& config);
};

struct OptimConfig {
  std::string name;  // adamw | sgd
  double lr;
  double weight_decay;
  double beta1;
  double beta2;
  double momentum;
  std::string schedule;  // constant | cosine | linear
  int64_t warmup_steps;
  double min_lr_ratio;
  static OptimConfig From(const Config& config);
};

struct TrainConfig {
  int64_t steps;
  int64_t log_every;
  int64_t eval_every;
  int64_t checkpoint_every;
  static TrainConfig From(const Config& config);
};

struct DistConfig {
  std::string backend;  // auto | gloo | nccl
  int64_t nproc;
  static DistConfig From(const Config& config);
};

}  // namespace topspin
