#include "topspin/core/config_schema.h"

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {

namespace {

using VT = ValueType;
constexpr double kMaxInt = 9.0e15;
constexpr double kMaxWidth = double(int64_t{1} << 20);  // one layer's width

Schema BuildSchema() {
  Schema s;
  s.Section("run", "What the run is called, its seed, and where its outputs go.")
      .Add({.key = "run.name",
            .type = VT::kString,
            .default_value = std::string("run"),
            .doc = "name of the run; the run directory is <run.dir>/<name>-NNN",
            .hashed = false})
      .Add({.key = "run.seed",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = kMaxInt,
            .doc = "seed of every random choice (order, init, dropout)"})
      .Add({.key = "run.dir",
            .type = VT::kString,
            .default_value = std::string("runs"),
            .doc = "parent directory of run directories",
            .hashed = false})
      .Add({.key = "run.log_level",
            .type = VT::kString,
            .default_value = std::string("info"),
            .choices = {"trace", "debug", "info", "warn", "error", "off"},
            .doc = "console log level (--log-level wins)",
            .hashed = false})
      .Add({.key = "run.progress_interval_s",
            .type = VT::kFloat,
            .default_value = 10.0,
            .min = 0.1,
            .max = 3600,
            .doc = "seconds between progress lines when not on a terminal",
            .hashed = false});
  s.Section("data", "Datasets: directories written by `topspin convert` or `topspin gen`.")
      .Add({.key = "data.train",
            .type = VT::kString,
            .default_value = std::string(""),
            .doc = "training dataset directory"})
      .Add({.key = "data.valid",
            .type = VT::kString,
            .default_value = std::string(""),
            .doc = "validation dataset directory (empty: no validation)"});
  s.Section("pipeline",
            "The input pipeline, set by hand: `topspin pipeline CONFIG` measures a setting's "
            "throughput and stalls.")
      .Add({.key = "pipeline.threads",
            .type = VT::kInt,
            .default_value = int64_t{4},
            .min = 1,
            .max = 256,
            .doc = "worker threads for read, decode and transform"})
      .Add({.key = "pipeline.prefetch",
            .type = VT::kInt,
            .default_value = int64_t{4},
            .min = 1,
            .max = 1024,
            .doc = "batches prepared ahead of the trainer"})
      .Add({.key = "pipeline.batch_size",
            .type = VT::kInt,
            .default_value = int64_t{256},
            .min = 1,
            .max = 16777216,
            .doc = "global batch size in samples (lists or sequences)"})
      .Add({.key = "pipeline.shuffle",
            .type = VT::kString,
            .default_value = std::string("block"),
            .choices = {"none", "block", "global"},
            .doc = "sample order: none, block (row groups, then within a window) or global"})
      .Add({.key = "pipeline.drop_last",
            .type = VT::kBool,
            .default_value = true,
            .doc = "drop the last partial global batch of an epoch"})
      .Add({.key = "pipeline.window_blocks",
            .type = VT::kInt,
            .default_value = int64_t{16},
            .min = 1,
            .max = 1048576,
            .doc = "block shuffle: row-group-sized blocks shuffled together in one window"})
      .Add({.key = "pipeline.dense",
            .type = VT::kStringList,
            .default_value = std::vector<std::string>{},
            .doc = "dense feature chains, \"<column>: <op> | <op>\" (docs/PIPELINE.md)"})
      .Add({.key = "pipeline.sparse",
            .type = VT::kStringList,
            .default_value = std::vector<std::string>{},
            .doc = "sparse id chains ending in bucketize(N), hash(S), cross(S) or cast"})
      .Add({.key = "pipeline.on_error",
            .type = VT::kString,
            .default_value = std::string("fail"),
            .choices = {"fail", "skip"},
            .doc = "a damaged row group fails the run, or is skipped and counted"})
      .Add({.key = "pipeline.cache_mib",
            .type = VT::kInt,
            .default_value = int64_t{2048},
            .min = 1,
            .max = 16777216,
            .doc = "transformed row groups kept in memory for reuse (MiB)",
            .hashed = false})
      .Add({.key = "pipeline.pinned_memory",
            .type = VT::kBool,
            .default_value = true,
            .doc = "page-locked batch buffers on CUDA machines (ignored on CPU)",
            .hashed = false});
  s.Section("optim", "Optimizer and learning-rate schedule of dense parameters.")
      .Add({.key = "optim.name",
            .type = VT::kString,
            .default_value = std::string("adamw"),
            .choices = {"adamw", "sgd"},
            .doc = "dense optimizer"})
      .Add({.key = "optim.lr",
            .type = VT::kFloat,
            .default_value = 1e-3,
            .min = 0,
            .max = 10,
            .doc = "peak learning rate"})
      .Add({.key = "optim.weight_decay",
            .type = VT::kFloat,
            .default_value = 0.01,
            .min = 0,
            .max = 1,
            .doc = "decoupled weight decay (AdamW) or L2 (SGD)"})
      .Add({.key = "optim.beta1",
            .type = VT::kFloat,
            .default_value = 0.9,
            .min = 0,
            .max = 0.9999,
            .doc = "AdamW first-moment decay"})
      .Add({.key = "optim.beta2",
            .type = VT::kFloat,
            .default_value = 0.999,
            .min = 0,
            .max = 0.999999,
            .doc = "AdamW second-moment decay"})
      .Add({.key = "optim.momentum",
            .type = VT::kFloat,
            .default_value = 0.9,
            .min = 0,
            .max = 1,
            .doc = "SGD momentum"})
      .Add({.key = "optim.schedule",
            .type = VT::kString,
            .default_value = std::string("cosine"),
            .choices = {"constant", "cosine", "linear"},
            .doc = "decay after warmup: constant, cosine or linear to min_lr_ratio * lr"})
      .Add({.key = "optim.warmup_steps",
            .type = VT::kInt,
            .default_value = int64_t{100},
            .min = 0,
            .max = kMaxInt,
            .doc = "linear warmup steps: step s < warmup runs at lr * (s + 1) / warmup_steps"})
      .Add({.key = "optim.sparse",
            .type = VT::kString,
            .default_value = std::string("adagrad"),
            .choices = {"adagrad", "lazy_adam"},
            .doc = "embedding optimizer: row-wise Adagrad or lazy Adam, on touched rows only"})
      .Add({.key = "optim.sparse_lr",
            .type = VT::kFloat,
            .default_value = 0.05,
            .min = 0,
            .max = 100,
            .doc = "embedding learning rate (follows the same schedule as lr)"})
      .Add({.key = "optim.clip_norm",
            .type = VT::kFloat,
            .default_value = 1.0,
            .min = 0,
            .max = 1e9,
            .doc = "global gradient-norm clip over dense and embedding gradients (0: off)"})
      .Add({.key = "optim.grad_accum",
            .type = VT::kInt,
            .default_value = int64_t{1},
            .min = 1,
            .max = 65536,
            .doc = "batches whose gradients are summed per optimizer step"})
      .Add({.key = "optim.min_lr_ratio",
            .type = VT::kFloat,
            .default_value = 0.1,
            .min = 0,
            .max = 1,
            .doc = "final learning rate as a fraction of lr"})
      .Add({.key = "optim.fused",
            .type = VT::kBool,
            .default_value = true,
            .doc = "AdamW in one pass over the flat buffers (own loop on the CPU, LibTorch's "
                   "fused kernel on CUDA); false: the composed tensor ops, one pass each"});
  s.Section("model", "The model: which workload (model.kind), the ranker's shape and loss, "
                     "the GPT's shape (model.gpt).")
      .Add({.key = "model.kind",
            .type = VT::kString,
            .default_value = std::string("ranker"),
            .choices = {"ranker", "gpt"},
            .doc = "the workload: the listwise search ranker (data: ranking shards), or a GPT "
                   "language model (data: a text dataset's token column)"})
      .Add({.key = "model.gpt.vocab",
            .type = VT::kInt,
            .default_value = int64_t{257},
            .min = 2,
            .max = int64_t{1} << 24,
            .doc = "GPT vocabulary size (257: the byte tokenizer); the data's token ids must "
                   "be below it"})
      .Add({.key = "model.gpt.vocab_multiple",
            .type = VT::kInt,
            .default_value = int64_t{1},
            .min = 1,
            .max = 4096,
            .doc = "pad the embedding and head rows to a multiple of this (64: 50257 -> 50304, "
                   "whole tiles for GPU matmuls); padded ids are never data or sampled"})
      .Add({.key = "model.gpt.context",
            .type = VT::kInt,
            .default_value = int64_t{128},
            .min = 1,
            .max = int64_t{1} << 20,
            .doc = "GPT tokens per sequence: training windows are context + 1 tokens"})
      .Add({.key = "model.gpt.layers",
            .type = VT::kInt,
            .default_value = int64_t{4},
            .min = 1,
            .max = 1024,
            .doc = "GPT transformer blocks"})
      .Add({.key = "model.gpt.d_model",
            .type = VT::kInt,
            .default_value = int64_t{256},
            .min = 1,
            .max = 65536,
            .doc = "GPT residual width (a multiple of model.gpt.heads)"})
      .Add({.key = "model.gpt.heads",
            .type = VT::kInt,
            .default_value = int64_t{4},
            .min = 1,
            .max = 1024,
            .doc = "GPT attention heads"})
      .Add({.key = "model.gpt.d_ff",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = int64_t{1} << 20,
            .doc = "GPT MLP hidden width (0: 4 x d_model)"})
      .Add({.key = "model.gpt.tied_embeddings",
            .type = VT::kBool,
            .default_value = true,
            .doc = "the GPT's output head shares the token embedding"})
      .Add({.key = "model.gpt.gelu",
            .type = VT::kString,
            .default_value = std::string("exact"),
            .choices = {"exact", "tanh"},
            .doc = "the MLP's GELU: exact (erf, nanoGPT's) or tanh (GPT-2's approximation, "
                   "Hugging Face's gelu_new)"})
      .Add({.key = "model.gpt.attention",
            .type = VT::kString,
            .default_value = std::string("sdpa"),
            .choices = {"sdpa", "sdpa_mask", "composed"},
            .doc = "training attention: sdpa (scaled_dot_product_attention, causal mask never "
                   "made: flash or memory-efficient on CUDA), sdpa_mask (the same with a stored "
                   "mask), composed (matmul, mask, softmax, matmul)"})
      .Add({.key = "model.gpt.fused_ops",
            .type = VT::kBool,
            .default_value = true,
            .doc = "LibTorch's LayerNorm and GELU kernels (false: composed from elementwise ops)"})
      .Add({.key = "model.embedding_dim",
            .type = VT::kInt,
            .default_value = int64_t{16},
            .min = 1,
            .max = 4096,
            .doc = "embedding width of every sparse feature"})
      .Add({.key = "model.bottom",
            .type = VT::kIntList,
            .default_value = std::vector<int64_t>{64},
            .min = 1,
            .max = kMaxWidth,
            .doc = "bottom MLP widths over the dense features, e.g. [256, 64] ([]: none)"})
      .Add({.key = "model.top",
            .type = VT::kIntList,
            .default_value = std::vector<int64_t>{128, 64},
            .min = 1,
            .max = kMaxWidth,
            .doc = "top MLP widths before the score, e.g. [128, 64]"})
      .Add({.key = "model.interaction",
            .type = VT::kString,
            .default_value = std::string("concat"),
            .choices = {"concat", "dcn"},
            .doc = "how dense and embedded features meet: concatenation or DCN-v2 cross layers"})
      .Add({.key = "model.cross_layers",
            .type = VT::kInt,
            .default_value = int64_t{2},
            .min = 0,
            .max = 16,
            .doc = "DCN-v2 cross layers (interaction dcn)"})
      .Add({.key = "model.loss",
            .type = VT::kString,
            .default_value = std::string("softmax"),
            .choices = {"mse", "bce", "ranknet", "lambdarank", "softmax", "approx_ndcg"},
            .doc = "ranking loss over each query's list"});
  s.Section("train", "The training loop.")
      .Add({.key = "train.steps",
            .type = VT::kInt,
            .default_value = int64_t{1000},
            .min = 1,
            .max = kMaxInt,
            .doc = "optimizer steps"})
      .Add({.key = "train.log_every",
            .type = VT::kInt,
            .default_value = int64_t{50},
            .min = 1,
            .max = kMaxInt,
            .doc = "steps between metric records",
            .hashed = false})
      .Add({.key = "train.eval_every",
            .type = VT::kInt,
            .default_value = int64_t{500},
            .min = 0,
            .max = kMaxInt,
            .doc = "steps between evaluations (0: only at the end)"})
      .Add({.key = "train.checkpoint_every",
            .type = VT::kInt,
            .default_value = int64_t{1000},
            .min = 0,
            .max = kMaxInt,
            .doc = "steps between checkpoints (0: only at the end)",
            .hashed = false})
      .Add({.key = "train.keep_checkpoints",
            .type = VT::kInt,
            .default_value = int64_t{3},
            .min = 1,
            .max = 1000000,
            .doc = "complete checkpoints kept (the newest and the best are never deleted)",
            .hashed = false})
      .Add({.key = "train.best.metric",
            .type = VT::kString,
            .default_value = std::string("auto"),
            .choices = {"auto", "ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map@10", "mrr", "loss",
                        "perplexity", "none"},
            .doc = "validation metric that picks the best checkpoint (with data.valid): a step "
                   "that improves it is checkpointed and kept; eval and score default to it. "
                   "auto: ndcg@10 (ranker), loss (gpt); none: no best checkpoint, no early "
                   "stopping",
            .hashed = false})
      .Add({.key = "train.best.mode",
            .type = VT::kString,
            .default_value = std::string("auto"),
            .choices = {"auto", "max", "min"},
            .doc = "whether a higher (max) or lower (min) train.best.metric is better; auto: "
                   "min for loss and perplexity, max for the ranking metrics",
            .hashed = false})
      .Add({.key = "train.early_stop.patience",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = kMaxInt,
            .doc = "stop after this many evaluations in a row without a better "
                   "train.best.metric (0: never stop early)",
            .hashed = false})
      .Add({.key = "train.early_stop.min_delta",
            .type = VT::kFloat,
            .default_value = 0.0,
            .min = 0.0,
            .max = 1.0,
            .doc = "how much better than the best an evaluation must be to count as better "
                   "(the metrics lie in [0, 1])",
            .hashed = false})
      .Add({.key = "train.max_bad_steps",
            .type = VT::kInt,
            .default_value = int64_t{5},
            .min = 1,
            .max = 1000000,
            .doc = "consecutive steps with a non-finite loss or gradient (each skipped) before "
                   "the run stops"})
      .Add({.key = "train.eval_batches",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = kMaxInt,
            .doc = "validation batches per evaluation (0: the whole of data.valid)"})
      .Add({.key = "train.precision",
            .type = VT::kString,
            .default_value = std::string("fp32"),
            .choices = {"fp32", "bf16"},
            .doc = "forward matmuls in bf16 under autocast (fp32 master weights, losses and "
                   "optimizer); docs/TRAINING.md says when it pays"})
      .Add({.key = "train.tf32",
            .type = VT::kBool,
            .default_value = true,
            .doc = "CUDA: float32 matmuls on TF32 tensor cores (Ampere and newer); no effect on "
                   "the CPU"})
      .Add({.key = "train.device",
            .type = VT::kString,
            .default_value = std::string("auto"),
            .choices = {"auto", "cpu", "cuda"},
            .doc = "where the model computes; auto: the GPU when one is visible (rank r of a "
                   "host takes GPU r), else the CPU. Checkpoints load on either",
            .hashed = false})
      .Add({.key = "train.torch_threads",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = 1024,
            .doc = "LibTorch intra-op threads (0: one per core); results are bitwise "
                   "reproducible for a fixed value",
            .hashed = false});
  s.Section("dist", "Distributed training.")
      .Add({.key = "dist.backend",
            .type = VT::kString,
            .default_value = std::string("auto"),
            .choices = {"auto", "gloo", "nccl"},
            .doc = "c10d backend for device tensors; auto: NCCL when training on GPUs, Gloo on "
                   "the CPU (host-side totals always use Gloo); gloo refuses a GPU run"})
      .Add({.key = "dist.nproc",
            .type = VT::kInt,
            .default_value = int64_t{1},
            .min = 1,
            .max = 4096,
            .doc = "processes on this host for a local launch (--nproc wins)",
            .hashed = false})
      .Add({.key = "dist.timeout_s",
            .type = VT::kFloat,
            .default_value = 300.0,
            .min = 1.0,
            .max = 86400.0,
            .doc = "seconds any rendezvous or collective waits before the job fails (a rank died "
                   "or stalled)",
            .hashed = false})
      .Add({.key = "dist.bucket_mib",
            .type = VT::kInt,
            .default_value = int64_t{25},
            .min = 1,
            .max = 4096,
            .doc = "gradient bucket size: each bucket's all-reduce starts as soon as backward "
                   "has filled it",
            .hashed = false})
      .Add({.key = "dist.overlap",
            .type = VT::kBool,
            .default_value = true,
            .doc = "overlap bucket all-reduces with backward (false: all after backward)",
            .hashed = false})
      .Add({.key = "dist.zero",
            .type = VT::kInt,
            .default_value = int64_t{0},
            .min = 0,
            .max = 3,
            .doc = "1: shard the dense optimizer state over ranks (ZeRO-1), bitwise the results "
                   "of 0; 2: and the dense gradients (ZeRO-2, reduce-scattered; equal to 0 up "
                   "to float rounding); 3: and the parameters, gathered unit by unit (ZeRO-3; "
                   "model.kind gpt)",
            .hashed = false})
      .Add({.key = "dist.wrap_blocks",
            .type = VT::kInt,
            .default_value = int64_t{1},
            .min = 1,
            .max = 1024,
            .doc = "ZeRO-3: GPT blocks per unit gathered at once (more: fewer, larger "
                   "collectives and more memory)",
            .hashed = false})
      .Add({.key = "dist.token_file",
            .type = VT::kString,
            .default_value = std::string(""),
            .doc = "file holding the job token for multi-host jobs (TOPSPIN_JOB_TOKEN wins)",
            .hashed = false});
  return s;
}

}  // namespace

const Schema& TopspinSchema() {
  static const Schema schema = BuildSchema();
  return schema;
}

RunConfig RunConfig::From(const Config& c) {
  return {.name = c.GetString("run.name"),
          .seed = c.GetInt("run.seed"),
          .dir = c.GetString("run.dir"),
          .log_level = c.GetString("run.log_level"),
          .progress_interval_s = c.GetFloat("run.progress_interval_s")};
}

const std::string& DataConfig::Dir(std::string_view key) const {
  if (key == "data.train") return train;
  if (key == "data.valid") return valid;
  throw InternalError(fmt::format("\"{}\" is not a dataset key", key));
}

DataConfig DataConfig::From(const Config& c) {
  return {.train = c.GetString("data.train"), .valid = c.GetString("data.valid")};
}

PipelineConfig PipelineConfig::From(const Config& c) {
  return {.threads = c.GetInt("pipeline.threads"),
          .prefetch = c.GetInt("pipeline.prefetch"),
          .batch_size = c.GetInt("pipeline.batch_size"),
          .shuffle = c.GetString("pipeline.shuffle"),
          .drop_last = c.GetBool("pipeline.drop_last"),
          .pinned_memory = c.GetBool("pipeline.pinned_memory"),
          .window_blocks = c.GetInt("pipeline.window_blocks"),
          .dense = c.GetStringList("pipeline.dense"),
          .sparse = c.GetStringList("pipeline.sparse"),
          .on_error = c.GetString("pipeline.on_error"),
          .cache_mib = c.GetInt("pipeline.cache_mib")};
}

ModelConfig ModelConfig::From(const Config& c) {
  return {.kind = c.GetString("model.kind"),
          .ranker = {.embedding_dim = c.GetInt("model.embedding_dim"),
                     .bottom = c.GetIntList("model.bottom"),
                     .top = c.GetIntList("model.top"),
                     .interaction = c.GetString("model.interaction"),
                     .cross_layers = c.GetInt("model.cross_layers"),
                     .loss = c.GetString("model.loss")},
          .gpt = {.vocab = c.GetInt("model.gpt.vocab"),
                  .context = c.GetInt("model.gpt.context"),
                  .layers = c.GetInt("model.gpt.layers"),
                  .d_model = c.GetInt("model.gpt.d_model"),
                  .heads = c.GetInt("model.gpt.heads"),
                  .d_ff = c.GetInt("model.gpt.d_ff"),
                  .tied_embeddings = c.GetBool("model.gpt.tied_embeddings"),
                  .vocab_multiple = c.GetInt("model.gpt.vocab_multiple"),
                  .gelu = c.GetString("model.gpt.gelu"),
                  .attention = c.GetString("model.gpt.attention"),
                  .fused_ops = c.GetBool("model.gpt.fused_ops")}};
}

OptimConfig OptimConfig::From(const Config& c) {
  return {.name = c.GetString("optim.name"),
          .lr = c.GetFloat("optim.lr"),
          .weight_decay = c.GetFloat("optim.weight_decay"),
          .beta1 = c.GetFloat("optim.beta1"),
          .beta2 = c.GetFloat("optim.beta2"),
          .momentum = c.GetFloat("optim.momentum"),
          .schedule = c.GetString("optim.schedule"),
          .warmup_steps = c.GetInt("optim.warmup_steps"),
          .min_lr_ratio = c.GetFloat("optim.min_lr_ratio"),
          .sparse = c.GetString("optim.sparse"),
          .sparse_lr = c.GetFloat("optim.sparse_lr"),
          .clip_norm = c.GetFloat("optim.clip_norm"),
          .grad_accum = c.GetInt("optim.grad_accum"),
          .fused = c.GetBool("optim.fused")};
}

TrainConfig TrainConfig::From(const Config& c) {
  return {.steps = c.GetInt("train.steps"),
          .log_every = c.GetInt("train.log_every"),
          .eval_every = c.GetInt("train.eval_every"),
          .checkpoint_every = c.GetInt("train.checkpoint_every"),
          .keep_checkpoints = c.GetInt("train.keep_checkpoints"),
          .best = {.metric = c.GetString("train.best.metric"),
                   .mode = c.GetString("train.best.mode")},
          .early_stop = {.patience = c.GetInt("train.early_stop.patience"),
                         .min_delta = c.GetFloat("train.early_stop.min_delta")},
          .max_bad_steps = c.GetInt("train.max_bad_steps"),
          .eval_batches = c.GetInt("train.eval_batches"),
          .precision = c.GetString("train.precision"),
          .tf32 = c.GetBool("train.tf32"),
          .device = c.GetString("train.device"),
          .torch_threads = c.GetInt("train.torch_threads")};
}

DistConfig DistConfig::From(const Config& c) {
  return {.backend = c.GetString("dist.backend"),
          .nproc = c.GetInt("dist.nproc"),
          .timeout_s = c.GetFloat("dist.timeout_s"),
          .bucket_mib = c.GetInt("dist.bucket_mib"),
          .overlap = c.GetBool("dist.overlap"),
          .zero = c.GetInt("dist.zero"),
          .wrap_blocks = c.GetInt("dist.wrap_blocks"),
          .token_file = c.GetString("dist.token_file")};
}

Settings Settings::From(const Config& c) {
  return {.run = RunConfig::From(c),
          .data = DataConfig::From(c),
          .pipeline = PipelineConfig::From(c),
          .model = ModelConfig::From(c),
          .optim = OptimConfig::From(c),
          .train = TrainConfig::From(c),
          .dist = DistConfig::From(c)};
}

}  // namespace topspin
