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

// The typed sections below are read from a Config once (Settings::From,
// at start-up) and passed down: nothing past the program's entry reads a
// key by name. Each field is the key of the same name in its section.

struct RunConfig {
  std::string name;
  int64_t seed = 0;
  std::string dir;
  std::string log_level;
  double progress_interval_s = 0;
  static RunConfig From(const Config& config);
};

struct DataConfig {
  std::string train;  // dataset directory
  std::string valid;  // dataset directory, may be empty
  // The directory of "data.train" or "data.valid".
  const std::string& Dir(std::string_view key) const;
  static DataConfig From(const Config& config);
};

struct PipelineConfig {
  int64_t threads = 1;
  int64_t prefetch = 1;
  int64_t batch_size = 1;
  std::string shuffle;  // none | block | global
  bool drop_last = false;
  bool pinned_memory = false;
  int64_t window_blocks = 1;
  std::vector<std::string> dense;   // feature chains (topspin/pipeline/transform.h)
  std::vector<std::string> sparse;
  std::string on_error;  // fail | skip
  int64_t cache_mib = 0;
  static PipelineConfig From(const Config& config);
};

struct RankerModelConfig {
  int64_t embedding_dim = 16;
  std::vector<int64_t> bottom;  // MLP widths
  std::vector<int64_t> top;
  std::string interaction;  // concat | dcn
  int64_t cross_layers = 0;
  std::string loss;  // mse | bce | ranknet | lambdarank | softmax | approx_ndcg
};

struct GptModelConfig {
  int64_t vocab = 0;
  int64_t context = 0;
  int64_t layers = 0;
  int64_t d_model = 0;
  int64_t heads = 0;
  int64_t d_ff = 0;  // 0: 4 x d_model
  bool tied_embeddings = true;
  int64_t vocab_multiple = 1;  // the model's rows: vocab rounded up to a multiple of this
  std::string gelu = "exact";  // exact | tanh
  std::string attention = "sdpa";  // sdpa | sdpa_mask | composed
  bool fused_ops = true;           // LibTorch's LayerNorm and GELU kernels
};

struct ModelConfig {
  std::string kind;          // ranker | gpt
  RankerModelConfig ranker;  // model.embedding_dim, model.bottom, ...
  GptModelConfig gpt;        // model.gpt.*
  static ModelConfig From(const Config& config);
};

struct OptimConfig {
  std::string name;  // adamw | sgd
  double lr = 0;
  double weight_decay = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double momentum = 0;
  std::string schedule;  // constant | cosine | linear
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0;
  std::string sparse;  // adagrad | lazy_adam
  double sparse_lr = 0;
  double clip_norm = 0;  // 0: off
  int64_t grad_accum = 1;
  bool fused = true;  // one-pass AdamW (false: composed ops)
  static OptimConfig From(const Config& config);
};

struct TrainConfig {
  int64_t steps = 1;
  int64_t log_every = 1;
  int64_t eval_every = 0;
  int64_t checkpoint_every = 0;
  int64_t keep_checkpoints = 0;
  struct Best {
    std::string metric;  // auto | none | a validation metric
    std::string mode;    // auto | max | min
  } best;
  struct EarlyStop {
    int64_t patience = 0;  // 0: off
    double min_delta = 0;
  } early_stop;
  int64_t max_bad_steps = 1;
  int64_t eval_batches = 0;  // 0: all
  std::string precision;     // fp32 | bf16
  bool tf32 = true;          // CUDA float32 matmuls on TF32 tensor cores
  std::string device;        // auto | cpu | cuda
  int64_t torch_threads = 0;
  static TrainConfig From(const Config& config);
};

struct DistConfig {
  std::string backend;  // auto | gloo | nccl
  int64_t nproc = 1;
  double timeout_s = 0;
  int64_t bucket_mib = 0;
  bool overlap = true;
  int64_t zero = 0;
  int64_t wrap_blocks = 1;
  std::string token_file;
  static DistConfig From(const Config& config);
};

// Every section, typed.
struct Settings {
  RunConfig run;
  DataConfig data;
  PipelineConfig pipeline;
  ModelConfig model;
  OptimConfig optim;
  TrainConfig train;
  DistConfig dist;
  static Settings From(const Config& config);
};

}  // namespace topspin
