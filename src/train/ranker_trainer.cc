#include "topspin/train/ranker_trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/allocator_policy.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/progress.h"
#include "topspin/core/strings.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/dataset.h"
#include "topspin/data/manifest.h"
#include "topspin/data/safetensors.h"
#include "topspin/ddp/comm.h"
#include "topspin/ddp/grad_sync.h"
#include "topspin/model/rank_losses.h"
#include "topspin/model/rank_metrics.h"
#include "topspin/model/ranker.h"
#include "topspin/perf/memory.h"
#include "topspin/perf/metrics_sink.h"
#include "topspin/perf/profile.h"
#include "topspin/perf/trace.h"
#include "topspin/perf/tensorboard.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/pipeline/pipeline_config.h"
#include "topspin/train/flat_params.h"
#include "topspin/train/device.h"
#include "topspin/train/lr_schedule.h"
#include "train/batch_copier.h"
#include "train/device_timer.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

RankerOptions ModelOptions(const Config& config, const Pipeline& p) {
  RankerOptions o;
  o.dense_dim = static_cast<int64_t>(p.layout().dense_dim);
  for (uint64_t c : p.sparse_cardinalities()) o.table_sizes.push_back(static_cast<int64_t>(c));
  o.embedding_dim = config.GetInt("model.embedding_dim");
  o.bottom = ParseLayerWidths(config.GetString("model.bottom"));
  o.top = ParseLayerWidths(config.GetString("model.top"));
  o.interaction = ParseInteraction(config.GetString("model.interaction"));
  o.cross_layers = static_cast<int>(config.GetInt("model.cross_layers"));
  o.seed = static_cast<uint64_t>(config.GetInt("run.seed"));
  return o;
}

// Refuses, before anything is allocated, a model whose training state
// cannot fit in this host's memory: parameters, gradients and optimizer
// state of the dense layers and of every embedding table. The key named is
// the one that asks for the most.
void CheckModelFitsInMemory(const Config& config, const RankerOptions& o,
                            const std::vector<std::string>& sparse_names, uint64_t available) {
  if (available == 0) return;  // unknown: the allocator decides
  const double dense_per_param = 4 + 4 + (config.GetString("optim.name") == "adamw" ? 8 : 4);
  const bool lazy_adam = config.GetString("optim.sparse") == "lazy_adam";
  const double dense = double(RankerDenseParameters(o)) * dense_per_param;
  double total = dense, largest = 0;
  size_t largest_table = 0;
  for (size_t c = 0; c < o.table_sizes.size(); ++c) {
    // Rows, plus two moments (lazy Adam) or one accumulator per row (Adagrad).
    const double rows = double(o.table_sizes[c]);
    const double bytes =
        rows * 4 * double(o.embedding_dim) * (lazy_adam ? 3 : 1) + (lazy_adam ? 0 : rows * 4);
    total += bytes;
    if (bytes > largest) largest = bytes, largest_table = c;
  }
  if (total <= 0.9 * double(available)) return;
  const bool table = largest > dense;
  const auto weights = [](int64_t in, const std::vector<int64_t>& widths) {
    double n = 0;
    for (int64_t w : widths) n += double(in) * double(std::exchange(in, w));
    return n;
  };
  const int64_t bottom_out = o.bottom.empty() ? o.dense_dim : o.bottom.back();
  const int64_t width = bottom_out + int64_t(o.table_sizes.size()) * o.embedding_dim;
  const char* layers =
      weights(o.dense_dim, o.bottom) > weights(width, o.top) ? "model.bottom" : "model.top";
  const std::string what =
      table ? fmt::format("the embedding table of \"{}\" ({} rows x {} = {})",
                          largest_table < sparse_names.size() ? sparse_names[largest_table] : "?",
                          o.table_sizes[largest_table], o.embedding_dim,
                          FormatBytes(uint64_t(largest)))
            : fmt::format("the dense layers ({} parameters with gradients and optimizer state = {})",
                          RankerDenseParameters(o), FormatBytes(uint64_t(dense)));
  throw ConfigError(
      fmt::format("the model needs ~{} to train, more than the {} this host has available; the "
                  "largest part is {}",
                  FormatBytes(uint64_t(total)), FormatBytes(available), what),
      ErrorWhere{.field = table ? "pipeline.sparse" : layers},
      table ? "hash that feature into fewer slots (hash(N) in its chain), or lower "
              "model.embedding_dim"
            : "use narrower layers (model.top, model.bottom)");
}

// train.early_stop needs a metric to judge by.
void CheckBestConfig(const Config& config) {
  if (config.GetString("train.best.metric") == "none" &&
      config.GetInt("train.early_stop.patience") > 0) {
    throw ConfigError("train.early_stop.patience needs train.best.metric, which is none",
                      ErrorWhere{.field = "train.early_stop.patience"},
                      "set train.best.metric (ndcg@10, ...), or train.early_stop.patience: 0");
  }
}

// A hashed key whose value differs between two CanonicalText()s.
struct KeyDifference {
  std::string key, saved, now;  // "unset" where the key is absent
};

std::vector<KeyDifference> ConfigDifferences(const std::string& saved, const std::string& now) {
  const auto parse = [](const std::string& text) {
    std::map<std::string, std::string> values;
    for (const std::string& line : Split(text, '\n')) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return values;
  };
  const auto a = parse(saved), b = parse(now);
  std::vector<KeyDifference> out;
  for (const auto& [key, value] : a) {
    const auto it = b.find(key);
    const std::string here = it == b.end() ? "unset" : it->second;
    if (here != value) out.push_back({key, value, here});
  }
  for (const auto& [key, value] : b) {
    if (!a.contains(key)) out.push_back({key, "unset", value});
  }
  return out;
}

// "model.top is 32 in the checkpoint and 64 here; optim.lr ...".
std::string DescribeConfigDifference(const std::vector<KeyDifference>& differences) {
  std::vector<std::string> parts;
  for (const auto& d : differences) {
    parts.push_back(d.saved == "unset" ? fmt::format("{} is new here ({})", d.key, d.now)
                                       : fmt::format("{} is {} in the checkpoint and {} here",
                                                     d.key, d.saved, d.now));
  }
  return Join(parts, "; ");
}

// "shard-00002.tshard row 1234 (dataset row 71234) holds 50": the first
// label outside [lo, hi] (or not finite), for the error that refuses it.
// Reads only the label column, and only on that error path.
std::string FirstBadLabel(const std::string& dir, const std::string& column, double lo, double hi) {
  const DatasetReader reader{fs::path(dir)};
  uint64_t before = 0;
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    const size_t c = shard.ColumnIndex(column);
    uint64_t in_shard = 0;
    for (size_t g = 0; g < shard.num_row_groups(); ++g) {
      const Column labels = shard.ReadChunk(g, c);
      for (size_t r = 0; r < labels.size(); ++r) {
        const double y = labels.AsDouble(r);
        if (labels.IsValid(r) && !(y >= lo && y <= hi)) {
          return fmt::format("{} row {} (dataset row {}) holds {}",
                             reader.manifest().shards[s].file, in_shard + r, before + r, y);
        }
      }
      in_shard += labels.size();
      before += labels.size();
    }
  }
  return "no row found";
}

// Refuses labels the loss cannot learn from, by the training data's label
// statistics: infinite ones always; outside [0, 31] for the losses that
// turn graded relevance into gains 2^label - 1; outside [0, label_max] for
// bce (it would clamp them silently).
void CheckLabels(const Manifest& data, const std::string& dir, RankLoss loss) {
  const auto it = data.stats.find(data.label_column);
  if (it == data.stats.end()) return;  // no label column: the pipeline says so
  const ColumnStats& s = it->second;
  const ErrorWhere where{.file = dir, .field = data.label_column};
  const std::string column = fmt::format("label column \"{}\"", data.label_column);
  if (s.infinite > 0) {
    throw DataError(fmt::format("the {} holds {} infinite value{}; the first: {}", column,
                                s.infinite, s.infinite == 1 ? "" : "s",
                                FirstBadLabel(dir, data.label_column, -DBL_MAX, DBL_MAX)),
                    where, "fix the labels and convert the data again");
  }
  if (s.quantiles.empty()) return;  // every label null: imputed 0
  double lo = -INFINITY, hi = INFINITY;
  const char* why = "";
  if (loss == RankLoss::kBce) {
    lo = 0, hi = RankLossOptions{}.label_max, why = "bce's targets are label / 4, in [0, 1]";
  } else if (loss == RankLoss::kLambdaRank || loss == RankLoss::kSoftmax ||
             loss == RankLoss::kApproxNdcg) {
    lo = 0, hi = 31, why = "its gains are 2^label - 1 of graded relevance";
  } else if (loss == RankLoss::kMse) {
    lo = -1e18, hi = 1e18, why = "squared errors of larger labels overflow";
  }
  if (s.min >= lo && s.max <= hi) return;
  throw DataError(
      fmt::format("the {} ranges from {} to {} (manifest statistics), but model.loss {} needs "
                  "labels in [{}, {}]: {}; the first outside: {}",
                  column, s.min, s.max, RankLossName(loss), lo, hi, why,
                  FirstBadLabel(dir, data.label_column, lo, hi)),
      where,
      "map the labels into that range when converting, or choose model.loss ranknet (any "
      "finite label) or mse");
}

// Sums the row gradients of several micro-batches per unique id.
RowGrads Coalesce(const std::vector<torch::Tensor>& ids, const std::vector<torch::Tensor>& grads) {
  if (ids.size() == 1) return {ids[0], grads[0]};
  return CoalesceRows(torch::cat(ids), torch::cat(grads));
}

// `t` must be a host tensor (the trainer copies device state out first).
SafetensorsTensor View(const std::string& name, const torch::Tensor& t) {
  const auto dtype =
      t.scalar_type() == torch::kLong ? SafetensorsDType::kI64 : SafetensorsDType::kF32;
  std::vector<uint64_t> shape;
  for (int64_t d : t.sizes()) shape.push_back(static_cast<uint64_t>(d));
  return {name, dtype, shape,
          std::span<const std::byte>(static_cast<const std::byte*>(t.data_ptr()), t.nbytes())};
}

// Adds the wall time of its scope to phases[name], and records it as a
// span on the trace's track when there is a trace. With an enabled
// DeviceTimer (CUDA) the phase is timed on the GPU instead (the host time
// of asynchronous launches means little); the trace keeps the host span.
class PhaseTimer {
 public:
  PhaseTimer(std::map<std::string, double>& phases, const char* name, TraceRecorder* trace,
             int track, DeviceTimer* device = nullptr)
      : total_(phases[name]),
        name_(name),
        trace_(trace),
        track_(track),
        device_(device),
        span_(device != nullptr ? device->Begin(name) : -1),
        start_(Clock::now()) {}
  ~PhaseTimer() {
    const auto end = Clock::now();
    const double secs = std::chrono::duration<double>(end - start_).count();
    if (span_ >= 0) {
      device_->End(span_);
    } else {
      total_ += secs;
    }
    if (trace_ != nullptr) trace_->Complete(track_, name_, "phase", trace_->Now() - secs, secs);
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& total_;
  const char* name_;
  TraceRecorder* trace_;
  int track_;
  DeviceTimer* device_;
  int span_;
  Clock::time_point start_;
};

torch::Device TorchDevice(const ComputeDevice& d) {
  return d.cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(d.index))
                : torch::Device(torch::kCPU);
}

// Waits for the device's queued work (nothing to wait for on the CPU).
void Synchronize(const ComputeDevice& d) {
  if (d.cuda) torch::cuda::synchronize(static_cast<int64_t>(d.index));
}

// Memory bandwidth (read + write bytes per second) of a 64 MiB copy on the
// device, pages touched first: the roof for the embedding-row traffic.
double MeasureCopyBandwidth(const ComputeDevice& device) {
  const auto o = torch::TensorOptions().device(TorchDevice(device));
  const auto a = torch::ones({int64_t{16} << 20}, o), b = torch::zeros({int64_t{16} << 20}, o);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Synchronize(device);
    const auto start = Clock::now();
    b.copy_(a);
    Synchronize(device);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * double(a.nbytes()) / s);
  }
  return best;
}

// Dense matmul FLOP/s the peak MFU is measured against: fp32 on the CPU's
// LibTorch threads (1024^3), on a GPU in the precision the run computes in
// (bf16 or fp32 with TF32 off, 4096^3, big enough for the tensor cores).
double MeasureMatmulPeak(const ComputeDevice& device, bool bf16) {
  const int64_t n = device.cuda ? 4096 : 1024;
  const auto o = torch::TensorOptions()
                     .device(TorchDevice(device))
                     .dtype(device.cuda && bf16 ? torch::kBFloat16 : torch::kFloat);
  const auto a = torch::randn({n, n}, o), b = torch::randn({n, n}, o);
  (void)torch::mm(a, b);  // warm up
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Synchronize(device);
    const auto start = Clock::now();
    for (int i = 0; i < 4; ++i) (void)torch::mm(a, b);
    Synchronize(device);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 4 * 2.0 * double(n) * double(n) * double(n) / s);
  }
  return best;
}

// Forward passes under bf16 autocast (train.precision: bf16) on the
// compute device: matmuls run in bf16 on fp32 master weights, the scores
// come back as fp32 for the loss.
class Precision {
 public:
  Precision(const Config& config, const ComputeDevice& device)
      : bf16_(config.GetString("train.precision") == "bf16"),
        type_(device.cuda ? at::kCUDA : at::kCPU) {}

  bool bf16() const { return bf16_; }

  template <typename F>
  auto Run(F&& forward) const {
    if (!bf16_) return forward();
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
    auto out = forward();
    at::autocast::set_autocast_enabled(type_, false);
    at::autocast::clear_cache();
    out.scores = out.scores.to(torch::kFloat);
    return out;
  }

 private:
  bool bf16_;
  at::DeviceType type_;
};

// The evaluation pipeline over `dataset_key`: every list once, in order,
// transformed with the training data's `statistics`.
std::unique_ptr<Pipeline> EvalPipeline(const Config& config, const std::string& dataset_key,
                                       std::shared_ptr<const Manifest> statistics) {
  PipelineOptions o = PipelineOptionsFromConfig(config);
  o.shuffle = ShuffleMode::kNone;
  o.drop_last = false;
  o.max_epochs = 1;
  return std::make_unique<Pipeline>(
      RankingSpecFromConfig(config, dataset_key, std::move(statistics)), o);
}

// Scores up to `max_batches` batches (0: all) on `device` and accumulates
// the metrics (on the host, from the host batch's labels and offsets).
RankMetricAccumulator Score(Ranker& ranker, Pipeline& pipeline, const Precision& precision,
                            int64_t max_batches, const ComputeDevice& device) {
  torch::NoGradGuard no_grad;
  RankMetricAccumulator acc;
  int64_t n = 0;
  const torch::Device to = TorchDevice(device);
  while (BatchPtr b = pipeline.Next()) {
    const BatchTensors t = WrapHost(*b);
    const auto scores =
        precision
            .Run([&] { return ranker.Forward(t.dense.to(to), t.sparse.to(to), /*train=*/false); })
            .scores.to(torch::kCPU)
            .contiguous();
    acc.AddBatch({scores.data_ptr<float>(), b->num_docs}, b->labels(), b->offsets());
    if (max_batches > 0 && ++n >= max_batches) break;
  }
  return acc;
}

std::map<std::string, double> MetricsOf(const RankMetricAccumulator& acc) {
  return {{"ndcg@1", acc.ndcg(1)},   {"ndcg@3", acc.ndcg(3)}, {"ndcg@5", acc.ndcg(5)},
          {"ndcg@10", acc.ndcg(10)}, {"map@10", acc.map()},   {"mrr", acc.mrr()}};
}

// A step-N checkpoint directory, loaded and verified.
Checkpoint LoadCheckpointDir(const fs::path& dir) {
  const std::string name = dir.filename().string();
  uint64_t step = 0;
  const char* digits = name.data() + std::min<size_t>(5, name.size());
  const char* end = name.data() + name.size();
  const auto [stop, ec] = std::from_chars(digits, end, step);
  if (!name.starts_with("step-") || digits == end || ec != std::errc() || stop != end) {
    throw ConfigError(fmt::format("{} is not a checkpoint directory (step-N)", dir.string()),
                      ErrorWhere{.file = dir.string()},
                      "pass a run directory or one of its checkpoints/step-N directories");
  }
  return CheckpointStore(dir.parent_path()).Load(step);
}

// A run directory's newest complete checkpoint, or a step-N directory.
// RUN_DIR/best.json: the run's best checkpoint (train.best), rewritten
// whenever a better evaluation is checkpointed.
constexpr const char* kBestFile = "best.json";

// A run directory's best checkpoint (best.json), or its newest when it has
// none, that one is gone or damaged, or `choice` asks for the newest; or a
// step-N directory as it is.
Checkpoint OpenCheckpoint(const fs::path& path, CheckpointChoice choice = CheckpointChoice::kBest) {
  if (!fs::is_directory(path / "checkpoints")) return LoadCheckpointDir(path);
  const CheckpointStore store(path / "checkpoints");
  if (choice == CheckpointChoice::kBest && fs::exists(path / kBestFile)) {
    try {
      const auto best = nlohmann::json::parse(ReadFile(path / kBestFile));
      const auto step = best.at("step").get<uint64_t>();
      if (fs::is_directory(store.root() / fmt::format("step-{}", step))) return store.Load(step);
      spdlog::warn("{} names step {}, which is gone: using the newest checkpoint",
                   (path / kBestFile).string(), step);
    } catch (const std::exception& e) {
      spdlog::warn("cannot use {} ({}): using the newest checkpoint", (path / kBestFile).string(),
                   e.what());
    }
  }
  auto latest = store.LoadLatest();
  if (!latest) {
    throw ConfigError(fmt::format("run directory {} has no complete checkpoint", path.string()),
                      ErrorWhere{.file = path.string()},
                      "train first, or pass a checkpoints/step-N directory");
  }
  return std::move(*latest);
}

// Copies checkpoint tensor `name` into the live tensor `t`: elements
// [offset, offset + t.numel()) of a saved tensor of `saved_numel` elements
// (by default the same size as t).
void CopyFromCheckpoint(const SafetensorsFile& file, const std::string& name, torch::Tensor& t,
                        int64_t offset = 0, int64_t saved_numel = -1) {
  const TensorView* v = file.Find(name);
  const ErrorWhere where{.file = file.path().string(), .field = name};
  constexpr const char* kOtherModel =
      "the checkpoint was written by a different model configuration (model.* or pipeline.* "
      "differ from the run's config.yaml)";
  if (v == nullptr) throw DataError("the checkpoint has no such tensor", where, kOtherModel);
  // Saved whole: the tensor's own shape; a shard is loaded from the flat
  // tensor of all of them.
  std::vector<uint64_t> shape;
  if (saved_numel < 0) {
    for (int64_t d : t.sizes()) shape.push_back(uint64_t(d));
  } else {
    shape = {uint64_t(saved_numel)};
  }
  const SafetensorsDType dtype = View(name, t).dtype;
  if (v->dtype != dtype || v->shape != shape) {
    const auto dims = [](const std::vector<uint64_t>& d) {
      return fmt::format("[{}]", fmt::join(d, ", "));
    };
    throw DataError(fmt::format("the checkpoint holds {} {}, the model needs {} {}",
                                SafetensorsDTypeName(v->dtype), dims(v->shape),
                                SafetensorsDTypeName(dtype), dims(shape)),
                    where, kOtherModel);
  }
  const void* from = v->bytes.data() + offset * t.element_size();
  if (t.device().is_cpu()) {
    std::memcpy(t.data_ptr(), from, t.nbytes());
  } else {  // through the host: checkpoints load on any device
    torch::NoGradGuard no_grad;
    t.copy_(torch::from_blob(const_cast<void*>(from), t.sizes(), t.options().device(torch::kCPU)));
  }
}

// The name of embedding table c in checkpoints.
std::string TableName(size_t c) { return fmt::format("table{}", c); }
// Checkpoints before 2026-12 held the dense parameters as this one flat
// tensor; they still load.
constexpr const char* kDenseParams = "dense.params";

// The dense parameters by module name ("dense.top.0.weight" [64, 48]),
// views of the flat buffer, so any safetensors reader gets them as the
// model names them. Reading a checkpoint that predates the names, the flat
// tensor instead.
std::vector<std::pair<std::string, torch::Tensor>> DenseParamTensors(
    const FlatParams& flat, const SafetensorsFile* reading = nullptr) {
  if (reading != nullptr && reading->Find(kDenseParams) != nullptr) {
    return {{kDenseParams, flat.params()}};
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& slot : flat.slots()) {
    out.emplace_back("dense." + slot.name,
                     flat.params().narrow(0, slot.offset, slot.numel).view(slot.shape));
  }
  return out;
}
constexpr const char* kStatisticsFile = "statistics.json";

class Trainer {
 public:
  Trainer(const Config& config, const RankerTrainOptions& options)
      : config_(config),
        options_(options),
        device_(ResolveDevice(config.GetString("train.device"), VisibleGpus(),
                              options.launch.local_rank)),
        schedule_(LrSchedule::From(config)),
        loss_kind_(ParseRankLoss(config.GetString("model.loss"))),
        precision_(config, device_),
        store_(options.run_dir / "checkpoints",
               {.keep_last = static_cast<size_t>(config.GetInt("train.keep_checkpoints"))}) {
    CheckBestConfig(config);
    KeepHeapMemory();     // reuse each step's temporaries instead of re-faulting them
    LimitBlasThreads(1);  // LibTorch's intra-op threads parallelise; OpenBLAS would spin
    const int64_t threads = config.GetInt("train.torch_threads");
    if (threads > 0) torch::set_num_threads(static_cast<int>(threads));
    const LaunchEnv& env = options.launch;
    UseDevice(device_);
    device_timer_ = std::make_unique<DeviceTimer>(device_);
    copier_ = std::make_unique<BatchCopier>(device_);
    if (env.world_size > 1) {
      if (device_.cuda && config.GetString("dist.backend") == "gloo") {
        throw ConfigError("dist.backend gloo cannot sum the gradients of a GPU run",
                          ErrorWhere{.field = "dist.backend"},
                          "use dist.backend auto (NCCL on GPUs), or train.device cpu");
      }
      RendezvousOptions rendezvous = options.rendezvous;
      rendezvous.backend = config.GetString("dist.backend");
      rendezvous.cuda_device = device_.index;
      comm_ = Comm::Connect(env, rendezvous);
    }
    trace_ = options.trace;
    if (trace_) {
      step_track_ = trace_->Track(fmt::format("rank {} steps", env.rank));
      track_ = trace_->Track(fmt::format("rank {} phases", env.rank));
    }
    if (options.peak_gbs > 0) {
      peak_bytes_per_s_ = options.peak_gbs * 1e9;
    } else if (options.measure_peak) {
      peak_bytes_per_s_ = MeasureCopyBandwidth(device_);
    }
    if (options.peak_tflops > 0) {
      peak_flops_ = options.peak_tflops * 1e12;
      peak_source_ = "given";
    } else if (options.measure_peak) {
      peak_flops_ = MeasureMatmulPeak(device_, precision_.bf16());
      peak_source_ = device_.cuda
                         ? fmt::format("measured: 4096^3 {} matmul on {}",
                                       precision_.bf16() ? "bf16" : "fp32", device_.Name())
                         : fmt::format("measured: 1024^3 fp32 matmul on {} threads",
                                       torch::get_num_threads());
    }
    PipelineState start;
    std::optional<Checkpoint> ckpt = FindCheckpoint();
    if (ckpt) start = PipelineStateOf(*ckpt);
    PipelineOptions popt = PipelineOptionsFromConfig(config, env.rank, env.world_size);
    popt.trace = options.trace;
    // Page-locked batch buffers: the host-to-device copies run async.
    if (device_.cuda && config.GetBool("pipeline.pinned_memory")) popt.allocator = PinnedAllocator();
    train_ = std::make_unique<Pipeline>(RankingSpecFromConfig(config, "data.train"), popt, start);
    statistics_ =
        std::make_shared<const Manifest>(Manifest::Load(config.GetString("data.train")));
    CheckLabels(*statistics_, config.GetString("data.train"), loss_kind_);
    // The validation data fails now, not at the first evaluation, when it
    // is missing or its schema differs from the training data's.
    if (env.rank == 0 && !config.GetString("data.valid").empty()) {
      EvalPipeline(config, "data.valid", statistics_);
    }
    const RankerOptions model = ModelOptions(config, *train_);
    // On a GPU the tables and state live in device memory (the allocator's
    // error names what it could not get).
    if (!device_.cuda) {
      CheckModelFitsInMemory(config, model, train_->sparse_names(), AvailableMemoryBytes());
    }
    ranker_ = std::make_unique<Ranker>(model);
    // Initialised on the host (the same values on any device), then moved:
    // the flat buffers, optimizer state and embedding rows live there.
    ranker_->To(TorchDevice(device_));
    // ZeRO-1: each rank keeps the optimizer state of one contiguous shard
    // of the flat buffer, updates that shard and all-gathers the rest.
    // ZeRO-2: and only that shard of the summed gradient (GradBuckets).
    zero_ = comm_ ? static_cast<int>(config.GetInt("dist.zero")) : 0;
    flat_ = std::make_unique<FlatParams>(ranker_->dense_module(), nullptr, zero_ < 2);
    const OptimConfig optim = OptimConfig::From(config);
    shard_numel_ = flat_->numel();
    if (zero_ >= 1) {
      std::tie(shard_offset_, shard_numel_) =
          ShardRange(flat_->numel(), env.world_size, env.rank);
    }
    dense_opt_ = std::make_unique<DenseOptimizer>(
        shard_numel_,
        DenseOptimizer::Options{
            .kind = optim.name == "sgd" ? DenseOptimizer::Kind::kSgd : DenseOptimizer::Kind::kAdamW,
            .beta1 = optim.beta1,
            .beta2 = optim.beta2,
            .weight_decay = optim.weight_decay,
            .momentum = optim.momentum},
        flat_->params().options());
    const auto sparse_kind = config.GetString("optim.sparse") == "lazy_adam"
                                 ? SparseOptimizer::Kind::kLazyAdam
                                 : SparseOptimizer::Kind::kRowWiseAdagrad;
    for (const auto& table : ranker_->tables()) {
      sparse_opts_.emplace_back(
          table, SparseOptimizer::Options{
                     .kind = sparse_kind, .beta1 = optim.beta1, .beta2 = optim.beta2});
    }
    if (ckpt) {
      Restore(*ckpt);
    } else if (!options.init_from.empty()) {
      InitFrom(options.init_from);
    }
    if (comm_) {
      std::vector<std::pair<int64_t, int64_t>> slots;
      for (const auto& slot : flat_->slots()) slots.emplace_back(slot.offset, slot.numel);
      buckets_ = std::make_unique<GradBuckets>(
          *comm_, flat_->parameters(), slots, flat_->grads(),
          GradBuckets::Options{.bucket_bytes = config.GetInt("dist.bucket_mib") << 20,
                               .overlap = config.GetBool("dist.overlap"),
                               .shard_grads = zero_ >= 2});
      for (const auto& t : ranker_->tables()) table_rows_.push_back(t.size(0));
      docs_per_rank_ = static_cast<int64_t>(train_->layout().max_docs);
    }
    if (!leader()) return;  // rank 0 alone writes metrics
    fs::create_directories(options.run_dir);
    sinks_.Add(std::make_unique<JsonlWriter>(options.run_dir / "metrics.jsonl"));
    // One event file per process and start step: a resumed run (even within
    // the second its predecessor started) never collides with an old file.
    sinks_.Add(std::make_unique<TensorBoardWriter>(options.run_dir / "tb",
                                                   fmt::format(".{}.from{}", ::getpid(), step_)));
  }

  RankerTrainResult Run() {
    const int64_t steps = config_.GetInt("train.steps");
    const int64_t log_every = config_.GetInt("train.log_every");
    const int64_t eval_every = config_.GetInt("train.eval_every");
    const int64_t ckpt_every = config_.GetInt("train.checkpoint_every");
    ProgressOptions po;
    po.unit = "steps";
    po.interval_s = config_.GetFloat("run.progress_interval_s");
    if (!leader()) po.sink = [](const std::string&) {};  // rank 0 shows progress
    Progress progress("train", static_cast<uint64_t>(steps), po);
    progress.Update(static_cast<uint64_t>(step_));
    const auto started = Clock::now();
    auto window_start = started;
    double window_loss = 0;
    int64_t window_steps = 0, window_docs = 0, run_steps = 0, run_docs = 0;
    // Phase and loader-stage totals when the window began: each record
    // carries the window's share of them (the report's stacked bars).
    std::map<std::string, double> window_phases = result_.phase_s;
    // The loader's counters start with the pipeline, which works ahead
    // while the model is built: the first window counts that work too.
    std::map<std::string, double> window_stage_busy;
    bool first_record = true;
    while (step_ < steps) {
      const double step_start = trace_ ? trace_->Now() : 0;
      const auto [loss, docs] = Step();
      if (trace_) {
        trace_->Complete(step_track_, fmt::format("step {}", step_ + 1), "step", step_start,
                         trace_->Now() - step_start);
      }
      window_loss += loss;
      window_docs += docs;
      run_docs += docs;
      ++window_steps;
      ++step_;
      ++run_steps;
      progress.Update(static_cast<uint64_t>(step_));
      // Evaluation and checkpoint of this step run before its log record,
      // so their time is in the window they happened in; the record is on
      // disk (fdatasync) with the checkpoint.
      const bool dying = options_.stop_after_steps > 0 && run_steps >= options_.stop_after_steps;
      bool checkpointed = false, stop_early = false;
      if (stop_) {
        spdlog::warn("stop requested: checkpointing step {} and stopping", step_);
        result_.stopped = true;
        CheckpointAllRanks();
        checkpointed = true;
      } else if (!dying) {
        const bool last = step_ == steps;
        Verdict verdict;
        if ((eval_every > 0 && step_ % eval_every == 0) || last) verdict = EvaluateAllRanks();
        if ((ckpt_every > 0 && step_ % ckpt_every == 0) || last || verdict.best || verdict.stop) {
          CheckpointAllRanks();
          checkpointed = true;
        }
        stop_early = verdict.stop;
      }
      if (step_ % log_every == 0 || step_ == steps || stop_early) {
        PhaseTimer timer(result_.phase_s, "log", trace_, track_);
        device_timer_->Collect(result_.phase_s, /*wait=*/true);  // CUDA: the window's GPU phases
        const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
        result_.last_loss = window_loss / double(window_steps);
        MetricValues record = {{"loss", result_.last_loss},
                               {"lr", schedule_.At(step_ - 1)},
                               {"skipped_steps", double(result_.skipped_steps)}};
        // The report marks where a resumed run took over.
        if (first_record && result_.resumed_from >= 0) {
          record["resumed_from"] = double(result_.resumed_from);
        }
        first_record = false;
        // The window's mean global gradient norm, before clipping.
        if (window_grad_steps_ > 0) {
          record["grad_norm"] = window_grad_norm_ / double(window_grad_steps_);
        }
        window_grad_norm_ = 0;
        window_grad_steps_ = 0;
        const double paused = WindowPhases(window_phases, secs, window_steps, record);
        record["docs_per_s"] = double(window_docs) / std::max(1e-9, secs - paused);
        window_stage_busy = WindowStages(window_stage_busy, secs, record);
        sinks_.Write(step_, record, WallTimeNow());
        window_phases = result_.phase_s;
        window_loss = 0;
        window_steps = window_docs = 0;
        window_start = Clock::now();
      }
      if (checkpointed && leader()) {
        // The metrics up to this step are as durable as the checkpoint.
        PhaseTimer timer(result_.phase_s, "checkpoint", trace_, track_);
        sinks_.Flush();
      }
      if (stop_early) {
        spdlog::info("stopping early at step {}: {}", step_, result_.early_stop);
        break;
      }
      if (dying || stop_) break;
    }
    progress.Finish();
    device_timer_->Collect(result_.phase_s, /*wait=*/true);
    sinks_.Flush();
    result_.step = step_;
    result_.best_step = best_.step;
    result_.best_value = best_.value;
    result_.best_metric = best_.metric;
    result_.dense_params = flat_->numel();
    for (const auto& t : dense_opt_->state()) result_.dense_optimizer_bytes += t.nbytes();
    if (zero_ >= 2) {
      result_.dense_grad_bytes = buckets_->shard_grads().nbytes();
      result_.grad_staging_peak_bytes = buckets_->peak_staging_bytes();
    } else {
      result_.dense_grad_bytes = flat_->grads().nbytes();
    }
    // Training throughput: wall time less evaluation and checkpoints.
    const double busy = std::chrono::duration<double>(Clock::now() - started).count() -
                        result_.phase_s["eval"] - result_.phase_s["checkpoint"];
    result_.docs_per_s = busy > 0 ? double(run_docs) / busy : 0;
    const double wall = std::chrono::duration<double>(Clock::now() - started).count();
    if (leader() && run_steps > 0) WriteProfile(run_steps, wall, double(run_docs));
    if (leader()) WriteSummary();
    return result_;
  }

  // RUN_DIR/summary.json: what `topspin train` prints at the end, for
  // scripts and benchmarks (rank 0's figures; NaN is null).
  void WriteSummary() const {
    const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; };
    const RankerTrainResult& r = result_;
    nlohmann::json j{{"step", r.step},
                     {"resumed_from", r.resumed_from},
                     {"stopped_by_signal", r.stopped},
                     {"early_stop", r.early_stop},
                     {"docs_per_s", r.docs_per_s},
                     {"last_loss", number(r.last_loss)},
                     {"valid_ndcg10", number(r.valid_ndcg10)},
                     {"skipped_steps", r.skipped_steps},
                     {"phase_s", r.phase_s},
                     {"dense_params", r.dense_params},
                     {"dense_optimizer_bytes", r.dense_optimizer_bytes},
                     {"dense_grad_bytes", r.dense_grad_bytes},
                     {"grad_staging_peak_bytes", r.grad_staging_peak_bytes},
                     {"world_size", comm_ ? comm_->world_size() : 1},
                     {"checkpoint", r.checkpoint.string()}};
    if (r.best_step >= 0) {
      j["best"] = {{"step", r.best_step}, {"metric", r.best_metric}, {"value", number(r.best_value)}};
    }
    WriteFileAtomic(options_.run_dir / "summary.json", j.dump(2) + "\n");
  }

  // Adds "phase_ms/<phase>" (ms per step of the window, `other` the wall
  // time no phase claims) to `record`; returns the window's evaluation and
  // checkpoint seconds, which its throughput leaves out.
  double WindowPhases(const std::map<std::string, double>& start, double secs, int64_t steps,
                      MetricValues& record) const {
    double claimed = 0, paused = 0;
    for (const auto& phase : ProfilePhases()) {
      if (phase == "other") continue;
      const auto now = result_.phase_s.find(phase);
      const auto then = start.find(phase);
      const double delta = (now == result_.phase_s.end() ? 0.0 : now->second) -
                           (then == start.end() ? 0.0 : then->second);
      claimed += delta;
      if (phase == "eval" || phase == "checkpoint") paused += delta;
      record["phase_ms/" + phase] = 1e3 * delta / double(steps);
    }
    record["phase_ms/other"] = 1e3 * std::max(0.0, secs - claimed) / double(steps);
    return paused;
  }

  // Seconds each loader stage has been busy, summed over its threads.
  std::map<std::string, double> StageBusy() const {
    std::map<std::string, double> busy;
    for (const auto& st : train_->Stats().stages) busy[st.name] = st.busy_s;
    return busy;
  }

  // Adds "loader_busy/<stage>": the share of the loader threads' time over
  // the window that each stage kept busy (1 = every thread, all the time).
  // Returns the stages' busy seconds now: the next window's start.
  std::map<std::string, double> WindowStages(const std::map<std::string, double>& start,
                                             double secs, MetricValues& record) const {
    const double thread_s = secs * double(config_.GetInt("pipeline.threads"));
    std::map<std::string, double> now = StageBusy();
    if (thread_s <= 0) return now;
    for (const auto& [name, busy] : now) {
      const auto then = start.find(name);
      record["loader_busy/" + name] = (busy - (then == start.end() ? 0.0 : then->second)) / thread_s;
    }
    return now;
  }

  // RUN_DIR/profile.json: the phases of this run's steps, with the FLOPs,
  // memory traffic and loader use `topspin profile` analyses.
  void WriteProfile(int64_t steps, double wall_s, double docs) {
    StepProfile p;
    p.steps = steps;
    p.wall_s = wall_s;
    p.phase_s = result_.phase_s;
    double claimed = 0;
    for (const auto& [name, secs] : p.phase_s) claimed += secs;
    p.phase_s["other"] = std::max(0.0, wall_s - claimed);
    p.docs = docs;
    p.world_size = comm_ ? comm_->world_size() : 1;
    p.flops_per_doc = 3.0 * double(ranker_->ForwardFlopsPerDoc());
    p.peak_flops = peak_flops_;
    p.peak_source = peak_source_;
    p.peak_bytes_per_s = peak_bytes_per_s_;
    p.bytes_per_step = bytes_moved_ / double(std::max<int64_t>(1, steps));
    p.loader_threads = static_cast<int>(config_.GetInt("pipeline.threads"));
    for (const auto& st : train_->Stats().stages) p.stages.push_back({st.name, st.busy_s});
    const ProfileReport report = Analyze(p);
    WriteFileAtomic(options_.run_dir / kProfileFile, ProfileJson(p, report));
    result_.profile = p;
  }

 private:
  bool leader() const { return !comm_ || comm_->rank() == 0; }

  // Estimated memory traffic of one step's updates: each touched row is
  // read by the gather, its gradient written, the row read and written by
  // the optimizer with its state vectors (lazy Adam: 2, row-wise Adagrad:
  // a scalar); the dense buffers are streamed about 7 times (gradient,
  // parameters read and written, two moments read and written).
  double StepBytes(const std::vector<RowGrads>& rows) const {
    double bytes = 7.0 * 4 * double(flat_->numel());
    for (const auto& r : rows) bytes += double(r.grads.numel()) * 4 * (4 + 2 * row_state_vectors_);
    return bytes;
  }

  // The next micro-batch on the compute device. On CUDA the copies run
  // one batch ahead: this batch's copy was launched during the previous
  // micro-batch, and the next one's is launched now, before this one
  // computes.
  DeviceBatch NextBatch() {
    const auto fetch = [&] {
      BatchPtr b;
      {
        PhaseTimer timer(result_.phase_s, "data_wait", trace_, track_);
        b = train_->Next();
      }
      return copier_->Copy(std::move(b));
    };
    if (!device_.cuda) return fetch();
    if (!ahead_) ahead_ = fetch();
    DeviceBatch batch = std::move(*ahead_);
    ahead_ = fetch();
    copier_->Use(batch, *device_timer_);
    return batch;
  }

  // Where the loader resumes: the batch copied ahead has not been trained on.
  PipelineState LoaderState() const {
    PipelineState ps = train_->state();
    if (ahead_) {
      ps.epoch = ahead_->epoch;
      ps.next_batch = ahead_->index;
    }
    return ps;
  }

  // One optimizer step; returns (loss, documents) of the global batch.
  //
  // Host synchronisation: one read-back of [loss sum, squared gradient
  // norm, non-finite count] per step (on the CPU, free). With several
  // ranks the loss sum is read as the last backward starts, because the
  // step's totals travel (over Gloo) during it.
  std::pair<double, int64_t> Step() {
    const int64_t accum = config_.GetInt("optim.grad_accum");
    const size_t tables = ranker_->tables().size();
    DeviceTimer* gpu = device_timer_.get();
    // Declared first: freeing the step's row gradients counts as optimizer.
    std::optional<PhaseTimer> optimizer;
    std::vector<std::vector<torch::Tensor>> ids(tables), grads(tables);
    // This rank's loss sum, loss terms, documents and stop request, then at
    // 4 + rank the rows it will gather (SparseRowCount): summed over ranks
    // while the last backward runs, so the row gather needs no size exchange.
    const int world = comm_ ? comm_->world_size() : 1;
    auto totals = torch::zeros({4 + world}, torch::kDouble);
    auto* total = totals.data_ptr<double>();
    CommWork totals_work;
    torch::Tensor loss_sum;  // on the device, summed over micro-batches
    auto& phase = result_.phase_s;
    // Sync is the time blocked on collectives, exactly: the exchange's own
    // work (packing and summing rows, staging) is the update's preparation.
    const double sync_before = phase["sync"];
    const double blocked_before = comm_ ? comm_->blocked_seconds() : 0;
    const auto settle_sync = [&] {
      if (!comm_) return;
      const double blocked = comm_->blocked_seconds() - blocked_before;
      const double moved = (phase["sync"] - sync_before) - blocked;
      phase["sync"] -= moved;
      phase["optimizer"] += moved;
    };
    for (int64_t a = 0; a < accum; ++a) {
      DeviceBatch batch = NextBatch();
      // Declared first, so freeing this micro-batch's graph and activations
      // (at the end of the iteration) counts as backward.
      std::optional<PhaseTimer> backward;
      const BatchTensors& t = batch.t;
      std::optional<PhaseTimer> forward(std::in_place, phase, "forward", trace_, track_, gpu);
      const Ranker::Output out =
          precision_.Run([&] { return ranker_->Forward(t.dense, t.sparse, /*train=*/true); });
      // Backward of the loss sum; the gradients are divided by the global
      // count of loss terms once every rank's are summed.
      const RankLossTerms terms = RankingLossTerms(loss_kind_, out.scores, t.labels, t.offsets);
      forward.reset();
      loss_sum = loss_sum.defined() ? loss_sum + terms.sum.detach() : terms.sum.detach();
      total[1] += double(terms.count);
      total[2] += double(batch.num_docs);
      const bool last = a + 1 == accum;
      if (comm_ && last) {
        total[0] = loss_sum.item<double>();
        total[3] = options_.stop_requested && options_.stop_requested() ? 1 : 0;
        std::vector<int64_t> unique(tables);
        for (size_t c = 0; c < tables; ++c) {
          std::vector<torch::Tensor> seen = ids[c];  // earlier micro-batches
          seen.push_back(out.unique_ids[c]);
          unique[c] = seen.size() == 1 ? seen[0].size(0)
                                       : std::get<0>(at::_unique(torch::cat(seen))).size(0);
        }
        total[4 + comm_->rank()] = double(SparseRowCount(unique, table_rows_, world, docs_per_rank_));
        totals_work = comm_->AllReduceSumAsync(totals);
        buckets_->Arm();
      }
      backward.emplace(phase, "backward", trace_, track_, gpu);
      terms.sum.backward();
      for (size_t c = 0; c < tables; ++c) {
        ids[c].push_back(out.unique_ids[c]);
        grads[c].push_back(out.rows[c].grad());
      }
    }
    std::vector<RowGrads> rows;
    for (size_t c = 0; c < tables; ++c) rows.push_back(Coalesce(ids[c], grads[c]));
    if (comm_) {
      PhaseTimer sync(phase, "sync", trace_, track_);
      totals_work.Wait();
      std::vector<int64_t> sparse_rows(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) sparse_rows[size_t(r)] = int64_t(total[4 + r]);
      // The rows go on the wire first; the dense buckets are awaited while
      // they travel.
      rows = SyncRows(*comm_, rows, table_rows_, docs_per_rank_, &sparse_rows,
                      [&] { buckets_->Finish(); });
    } else if (options_.stop_requested && options_.stop_requested()) {
      total[3] = 1;
    }
    stop_ = total[3] > 0;
    const double terms_total = std::max(1.0, total[1]);
    const auto docs = static_cast<int64_t>(total[2]);
    optimizer.emplace(phase, "optimizer", trace_, track_, gpu);
    // This rank's part of the dense gradient: all of it, or with ZeRO-2 the
    // shard it owns (and the others' squares and finiteness are summed in).
    at::Tensor dense = zero_ >= 2 ? buckets_->shard_grads() : flat_->grads();
    dense.div_(terms_total);
    // [squared norm, non-finite elements], in double on the device: of this
    // rank's dense gradient, and of the (already summed) rows.
    const auto health = [](const at::Tensor& g) {
      return torch::stack({g.pow(2).sum(torch::kDouble),
                           g.isfinite().logical_not().sum().to(torch::kDouble)});
    };
    at::Tensor dense_health = health(dense);
    at::Tensor rows_health = torch::zeros({2}, dense_health.options());
    for (auto& r : rows) {
      r.grads.div_(terms_total);
      rows_health += health(r.grads);
    }
    // ZeRO-2: the shards' parts summed over ranks (on the device's group).
    if (zero_ >= 2) comm_->AllReduceSum(dense_health);
    // The one read-back of the step: [squared norm, non-finite, loss sum].
    const auto host = torch::cat({dense_health + rows_health,
                                  loss_sum.to(torch::kDouble).reshape({1})})
                          .to(torch::kCPU)
                          .contiguous();
    const double sq = host.data_ptr<double>()[0], bad = host.data_ptr<double>()[1];
    if (!comm_) total[0] = host.data_ptr<double>()[2];
    const double loss = total[0] / terms_total;
    const bool finite = std::isfinite(loss) && bad == 0 && std::isfinite(sq);
    if (!finite) {
      ++result_.skipped_steps;
      if (++bad_in_a_row_ >= config_.GetInt("train.max_bad_steps")) {
        throw DataError(fmt::format("training diverged: {} steps in a row had a non-finite loss "
                                    "or gradient (last at step {}: loss {}, {} non-finite "
                                    "gradient elements, gradient norm {})",
                                    bad_in_a_row_, step_, loss, bad, std::sqrt(sq)),
                        ErrorWhere{.field = "train.max_bad_steps"},
                        "lower optim.lr or optim.sparse_lr, or set optim.clip_norm");
      }
      spdlog::warn("step {}: non-finite loss or gradient; step skipped ({} in a row)", step_,
                   bad_in_a_row_);
      flat_->ZeroGrad();
      settle_sync();
      return {loss, docs};
    }
    bad_in_a_row_ = 0;
    const double clip = config_.GetFloat("optim.clip_norm");
    const double norm = std::sqrt(sq);
    window_grad_norm_ += norm;  // before clipping
    ++window_grad_steps_;
    if (clip > 0 && norm > clip) {
      const double scale = clip / (norm + 1e-6);
      dense.mul_(scale);
      for (auto& r : rows) r.grads.mul_(scale);
    }
    const double lr = schedule_.At(step_);
    const double sparse_lr = config_.GetFloat("optim.sparse_lr") *
                             (schedule_.peak_lr() > 0 ? lr / schedule_.peak_lr() : 1.0);
    at::Tensor shard = flat_->params().narrow(0, shard_offset_, shard_numel_);
    dense_opt_->Step(shard, zero_ >= 2 ? dense : dense.narrow(0, shard_offset_, shard_numel_), lr);
    if (zero_ >= 1) flat_->params().copy_(torch::cat(comm_->AllGatherRows(shard)));
    for (size_t c = 0; c < tables; ++c) {
      sparse_opts_[c].Step(ranker_->tables()[c], rows[c].ids, rows[c].grads, sparse_lr);
    }
    bytes_moved_ += StepBytes(rows);
    flat_->ZeroGrad();
    settle_sync();
    return {loss, docs};
  }

  // Rank 0 evaluates on data.valid and judges the result (train.best,
  // train.early_stop); every rank learns the verdict: whether this step is
  // a new best (it is checkpointed and kept) and whether to stop early.
  struct Verdict {
    bool best = false, stop = false;
  };
  Verdict EvaluateAllRanks() {
    Verdict v;
    if (leader() && !config_.GetString("data.valid").empty()) v = Evaluate();
    if (comm_) {
      auto flags = torch::tensor({double(v.best), double(v.stop)}, torch::kDouble);
      comm_->Broadcast(flags, 0);
      v = {flags[0].item<double>() > 0, flags[1].item<double>() > 0};
    }
    return v;
  }

  Verdict Evaluate() {
    PhaseTimer timer(result_.phase_s, "eval", trace_, track_);
    const auto valid = EvalPipeline(config_, "data.valid", statistics_);
    const RankMetricAccumulator acc =
        Score(*ranker_, *valid, precision_, config_.GetInt("train.eval_batches"), device_);
    result_.valid_ndcg10 = acc.ndcg(10);
    const auto metrics = MetricsOf(acc);
    std::map<std::string, double> record;
    for (const auto& [name, m] : metrics) record["valid/" + name] = m;
    if (best_.metric == "none") {  // no judging: no best checkpoint, no early stop
      sinks_.Write(step_, record, WallTimeNow());
      spdlog::info("step {}: valid {}", step_, acc.Summary());
      return {};
    }
    const double value = metrics.at(best_.metric);
    Verdict v;
    const bool better =
        best_.step < 0 ? std::isfinite(value)
                       : (best_.max ? value > best_.value + best_.min_delta
                                    : value < best_.value - best_.min_delta);
    if (better) {
      best_.step = step_;
      best_.value = value;
      best_.evals_since = 0;
      v.best = true;
    } else {
      ++best_.evals_since;
      v.stop = best_.patience > 0 && best_.evals_since >= best_.patience;
    }
    if (best_.step >= 0) record["best_step"] = double(best_.step);
    sinks_.Write(step_, record, WallTimeNow());
    spdlog::info("step {}: valid {}{}", step_, acc.Summary(),
                 better ? fmt::format(" (best {} so far)", best_.metric)
                        : fmt::format(" (best {} {:.4f} at step {})", best_.metric, best_.value,
                                      best_.step));
    if (v.stop) {
      result_.early_stop = fmt::format(
          "valid {} has not improved by more than {} in {} evaluations (best {:.4f} at step {})",
          best_.metric, best_.min_delta, best_.evals_since, best_.value, best_.step);
    }
    return v;
  }

  // ---- checkpoints ----

  // The checkpoint's tensors, live (`reading`: the file a restore reads).
  std::vector<std::pair<std::string, torch::Tensor>> StateTensors(
      const SafetensorsFile* reading = nullptr) {
    auto out = DenseParamTensors(*flat_, reading);
    const auto dense_state = dense_opt_->state();
    for (size_t i = 0; i < dense_state.size(); ++i) {
      out.emplace_back(fmt::format("dense.opt{}", i), dense_state[i]);
    }
    for (size_t c = 0; c < ranker_->tables().size(); ++c) {
      out.emplace_back(TableName(c), ranker_->tables()[c]);
      const auto s = sparse_opts_[c].state();
      for (size_t i = 0; i < s.size(); ++i)
        out.emplace_back(fmt::format("table{}.opt{}", c, i), s[i]);
    }
    return out;
  }

  // Every rank calls this at a checkpoint step: with ZeRO-1 the optimizer
  // state shards are gathered (a collective) so the checkpoint holds the
  // whole state and loads at any world size. Rank 0 writes it.
  void CheckpointAllRanks() {
    auto state = StateTensors();
    if (zero_ >= 1) {
      for (auto& [name, t] : state) {
        if (name.starts_with("dense.opt")) t = torch::cat(comm_->AllGatherRows(t));
      }
    }
    if (!leader()) return;
    for (auto& [name, t] : state) t = t.to(torch::kCPU).contiguous();  // device state out
    SaveCheckpoint(state);
  }

  void SaveCheckpoint(const std::vector<std::pair<std::string, torch::Tensor>>& state) {
    PhaseTimer timer(result_.phase_s, "checkpoint", trace_, track_);
    // A checkpoint of this step exists when this run resumed from an older
    // one (the newer was damaged, or the run died after writing it): the
    // deterministic rerun replaces it.
    const fs::path existing = store_.root() / fmt::format("step-{}", step_);
    if (fs::exists(existing)) {
      const fs::path doomed = store_.root() / fmt::format("step-{}.deleting", step_);
      fs::remove_all(doomed);
      fs::rename(existing, doomed);
      fs::remove_all(doomed);
    }
    CheckpointWriter w = store_.Begin(
        static_cast<uint64_t>(step_),
        best_.step >= 0 ? std::optional<uint64_t>(uint64_t(best_.step)) : std::nullopt);
    std::vector<SafetensorsTensor> views;
    for (const auto& [name, t] : state) views.push_back(View(name, t));
    w.AddFileWith("model.safetensors",
                  [&](const fs::path& path) { WriteSafetensors(path, views); });
    // The training data's statistics: `topspin eval` transforms any dataset
    // exactly as training did, without the training data.
    w.AddFile(kStatisticsFile, statistics_->ToJson());
    const PipelineState ps = LoaderState();
    nlohmann::json meta{
        {"step", step_},
        {"config_hash", config_.Hash()},
        {"config", config_.CanonicalText()},
        {"pipeline", {{"seed", ps.seed}, {"epoch", ps.epoch}, {"next_batch", ps.next_batch}}},
        {"dense_steps", dense_opt_->steps()},
        {"skipped_steps", result_.skipped_steps},
        {"bad_in_a_row", bad_in_a_row_}};
    if (!init_from_.empty()) meta["init_from"] = init_from_.string();
    if (best_.step >= 0) {
      meta["best"] = {{"step", best_.step},
                      {"metric", best_.metric},
                      {"value", best_.value},
                      {"evals_since", best_.evals_since}};
    }
    w.SetMeta(meta.dump());
    result_.checkpoint = w.Commit().dir;
    if (best_.step == step_) {
      // The best checkpoint is on disk: eval, score and report find it here.
      WriteFileAtomic(options_.run_dir / kBestFile,
                      nlohmann::json{{"step", best_.step},
                                     {"metric", "valid/" + best_.metric},
                                     {"mode", best_.max ? "max" : "min"},
                                     {"value", best_.value},
                                     {"checkpoint", fmt::format("checkpoints/step-{}", step_)}}
                              .dump(2) +
                          "\n");
    }
  }

  std::optional<Checkpoint> FindCheckpoint() {
    if (options_.resume.empty()) return std::nullopt;
    if (options_.resume == "auto") {
      auto latest = store_.LoadLatest();
      if (!latest) spdlog::info("no checkpoint in {}: starting fresh", store_.root().string());
      return latest;
    }
    return LoadCheckpointDir(options_.resume);
  }

  static PipelineState PipelineStateOf(const Checkpoint& c) {
    const auto meta = nlohmann::json::parse(c.meta_json);
    const auto& p = meta.at("pipeline");
    return {p.at("seed").get<uint64_t>(), p.at("epoch").get<uint64_t>(),
            p.at("next_batch").get<uint64_t>()};
  }

  // The checkpoint's config differs from this run's: a resume is refused
  // unless it is an extension (options_.extend) whose only hashed change is
  // a larger train.steps. The schedule is then the extended run's:
  // lr(step) over the new train.steps, logged where it differs from the
  // rate the old schedule had at this step. Rank 0 rewrites config.yaml so
  // later resumes of the run use the extended config.
  void CheckExtension(const Checkpoint& c, const nlohmann::json& meta) {
    const std::string saved_hash = meta.at("config_hash").get<std::string>();
    const ErrorWhere where{.file = c.dir.string()};
    if (!meta.contains("config")) {
      throw ConfigError(fmt::format("checkpoint {} was written with config hash {}, this run has {}",
                                    c.dir.string(), saved_hash, config_.Hash()),
                        where,
                        "resume with the run's config (its config.yaml); `topspin config hash` "
                        "shows what a config hashes to");
    }
    const auto differences =
        ConfigDifferences(meta.at("config").get<std::string>(), config_.CanonicalText());
    const std::string described = DescribeConfigDifference(differences);
    std::vector<std::string> other;
    int64_t saved_steps = -1;
    for (const auto& d : differences) {
      if (d.key != "train.steps") {
        other.push_back(d.key);
        continue;
      }
      std::from_chars(d.saved.data(), d.saved.data() + d.saved.size(), saved_steps);
    }
    if (!options_.extend) {
      throw ConfigError(
          fmt::format("checkpoint {} was written with config hash {}, this run has {}: {}",
                      c.dir.string(), saved_hash, config_.Hash(), described),
          where,
          other.empty()
              ? "to train a finished run on for more steps, add --extend (the schedule becomes "
                "the one over the new train.steps)"
              : "resume with the run's config (its config.yaml), or start a new run from this "
                "checkpoint's weights with --init-from CHECKPOINT");
    }
    const int64_t steps = config_.GetInt("train.steps");
    if (!other.empty()) {
      throw ConfigError(
          fmt::format("--extend changes only train.steps, but {} differ too: {}", Join(other, ", "),
                      described),
          ErrorWhere{.file = c.dir.string(), .field = other.front()},
          "start a new run from this checkpoint's weights with --init-from CHECKPOINT (optimizer "
          "state and schedule start fresh)");
    }
    if (saved_steps < 0 || steps <= saved_steps) {
      throw ConfigError(
          fmt::format("--extend needs a larger train.steps than the checkpoint's run ({}), not {}",
                      saved_steps < 0 ? std::string("unknown") : std::to_string(saved_steps), steps),
          ErrorWhere{.file = c.dir.string(), .field = "train.steps"},
          fmt::format("pass --set train.steps=N with N > {}", std::max<int64_t>(saved_steps, 0)));
    }
    const int64_t at = meta.at("step").get<int64_t>();
    TrainConfig old_train = TrainConfig::From(config_);
    old_train.steps = saved_steps;
    const double old_lr = LrSchedule(OptimConfig::From(config_), old_train).At(at);
    const double new_lr = schedule_.At(at);
    spdlog::info("extending the run from {} to {} steps at step {}{}", saved_steps, steps, at,
                 old_lr == new_lr ? std::string()
                                  : fmt::format(": the schedule over {} steps sets lr {:.3g} at this "
                                                "step (the old one had {:.3g})",
                                                steps, new_lr, old_lr));
    if (leader()) WriteFileAtomic(options_.run_dir / "config.yaml", config_.ToYaml());
  }

  // A new run that starts from a checkpoint's weights: the dense parameters
  // and embedding tables are copied (every tensor's shape must match this
  // config's model); optimizer state, step, schedule and data order start
  // fresh, and features are transformed with this run's data.train
  // statistics.
  void InitFrom(const fs::path& path) {
    const Checkpoint c = OpenCheckpoint(path);
    const SafetensorsFile file = SafetensorsFile::Open(c.FilePath("model.safetensors"));
    auto tensors = DenseParamTensors(*flat_, &file);
    for (size_t t = 0; t < ranker_->tables().size(); ++t) {
      tensors.emplace_back(TableName(t), ranker_->tables()[t]);
    }
    {
      torch::NoGradGuard no_grad;
      for (auto& [name, t] : tensors) CopyFromCheckpoint(file, name, t);
    }
    init_from_ = c.dir;
    spdlog::info("initialised from {} (step {}): its dense parameters and embedding tables; the "
                 "optimizer state, step and schedule start fresh",
                 c.dir.string(), c.step);
  }

  void Restore(const Checkpoint& c) {
    const auto meta = nlohmann::json::parse(c.meta_json);
    if (meta.at("config_hash").get<std::string>() != config_.Hash()) CheckExtension(c, meta);
    const SafetensorsFile file = SafetensorsFile::Open(c.FilePath("model.safetensors"));
    for (auto& [name, t] : StateTensors(&file)) {
      // A sharded optimizer state takes its shard of the whole state saved.
      const bool sharded = zero_ >= 1 && name.starts_with("dense.opt");
      CopyFromCheckpoint(file, name, t, sharded ? shard_offset_ : 0,
                         sharded ? flat_->numel() : -1);
    }
    step_ = meta.at("step").get<int64_t>();
    // StateTensors() are the live tensors: the copies above restored them.
    const auto optimizer_steps = meta.at("dense_steps").get<int64_t>();
    dense_opt_->set_steps(optimizer_steps);
    for (auto& s : sparse_opts_) s.set_steps(optimizer_steps);
    result_.skipped_steps = meta.at("skipped_steps").get<int64_t>();
    if (meta.contains("best") && meta["best"].value("metric", "") == best_.metric) {
      const auto& b = meta["best"];
      best_.step = b.at("step").get<int64_t>();
      best_.value = b.at("value").is_number() ? b.at("value").get<double>() : NAN;
      best_.evals_since = b.at("evals_since").get<int64_t>();
    }
    bad_in_a_row_ = meta.at("bad_in_a_row").get<int64_t>();
    result_.resumed_from = step_;
    result_.checkpoint = c.dir;  // until this run writes a newer one
    spdlog::info("resumed from {} (step {})", c.dir.string(), step_);
  }

  const Config& config_;
  RankerTrainOptions options_;
  ComputeDevice device_;  // train.device, resolved
  LrSchedule schedule_;
  RankLoss loss_kind_;
  Precision precision_;
  CheckpointStore store_;
  std::shared_ptr<const Manifest> statistics_;  // data.train's
  std::unique_ptr<Pipeline> train_;
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<FlatParams> flat_;
  std::unique_ptr<DenseOptimizer> dense_opt_;
  std::vector<SparseOptimizer> sparse_opts_;
  std::unique_ptr<DeviceTimer> device_timer_;  // phases on the GPU (CUDA only)
  std::unique_ptr<BatchCopier> copier_;
  std::optional<DeviceBatch> ahead_;  // CUDA: the next batch, its copy in flight
  std::unique_ptr<Comm> comm_;  // several ranks only
  std::unique_ptr<GradBuckets> buckets_;
  int zero_ = 0;                                // dist.zero with several ranks, else 0
  int64_t shard_offset_ = 0, shard_numel_ = 0;  // this rank's dense optimizer shard
  std::vector<int64_t> table_rows_;
  double window_grad_norm_ = 0;  // sum over the log window's finite steps
  int64_t window_grad_steps_ = 0;
  int64_t docs_per_rank_ = 0;
  bool stop_ = false;
  TraceRecorder* trace_ = nullptr;  // options_.trace
  int track_ = 0, step_track_ = 0;
  double peak_flops_ = 0;  // 0: unknown
  double peak_bytes_per_s_ = 0;
  std::string peak_source_;
  double bytes_moved_ = 0;
  // Optimizer state vectors per embedding row (lazy Adam 2, Adagrad ~0).
  const double row_state_vectors_ = config_.GetString("optim.sparse") == "lazy_adam" ? 2 : 0;
  MultiSink sinks_;
  int64_t step_ = 0, bad_in_a_row_ = 0;
  fs::path init_from_;  // the checkpoint --init-from copied the weights of
  // train.best and train.early_stop, and the best evaluation so far.
  struct Best {
    std::string metric;  // ndcg@10, ...
    bool max = true;
    int64_t patience = 0;
    double min_delta = 0;
    int64_t step = -1;  // -1: no evaluation yet
    double value = NAN;
    int64_t evals_since = 0;  // evaluations since the best
  } best_{.metric = config_.GetString("train.best.metric"),
          .max = config_.GetString("train.best.mode") == "max",
          .patience = config_.GetInt("train.early_stop.patience"),
          .min_delta = config_.GetFloat("train.early_stop.min_delta")};
  RankerTrainResult result_;
};

}  // namespace

std::string DescribePhases(const RankerTrainResult& r) {
  double total = 0;
  for (const auto& [name, s] : r.phase_s) total += s;
  std::string out;
  for (const char* name :
       {"data_wait", "h2d", "forward", "backward", "sync", "optimizer", "log", "eval", "checkpoint"}) {
    const auto it = r.phase_s.find(name);
    if (it == r.phase_s.end()) continue;
    std::string label(name);
    std::replace(label.begin(), label.end(), '_', ' ');
    out += fmt::format("{}{} {:.1f}% ({:.2f} s)", out.empty() ? "" : ", ", label,
                       total > 0 ? 100 * it->second / total : 0.0, it->second);
  }
  return out;
}

namespace {

// A checkpoint's model, ready to score data transformed as its training
// data was (the statistics saved with it).
struct InferenceModel {
  Checkpoint checkpoint;
  std::shared_ptr<const Manifest> statistics;
  ComputeDevice device;
  std::unique_ptr<Ranker> ranker;
};

// `pipeline_for` builds the pipeline from the checkpoint's statistics (the
// model's feature layout comes from it).
InferenceModel LoadInferenceModel(
    const Config& config, const fs::path& checkpoint, CheckpointChoice choice,
    const std::function<const Pipeline&(std::shared_ptr<const Manifest>)>& pipeline_for) {
  KeepHeapMemory();
  LimitBlasThreads(1);
  const int64_t threads = config.GetInt("train.torch_threads");
  if (threads > 0) torch::set_num_threads(static_cast<int>(threads));
  InferenceModel m;
  m.checkpoint = OpenCheckpoint(checkpoint, choice);
  const Checkpoint& ckpt = m.checkpoint;
  if (!ckpt.files.contains(kStatisticsFile)) {
    throw DataError(fmt::format("checkpoint {} has no {}: it predates evaluation outside "
                                "training",
                                ckpt.dir.string(), kStatisticsFile),
                    ErrorWhere{.file = ckpt.dir.string()},
                    "train again (or resume once) with this topspin to write one");
  }
  m.statistics = std::make_shared<const Manifest>(Manifest::FromJson(
      ReadFile(ckpt.FilePath(kStatisticsFile)), ckpt.FilePath(kStatisticsFile).string()));
  const Pipeline& pipeline = pipeline_for(m.statistics);
  m.device = ResolveDevice(config.GetString("train.device"), VisibleGpus(), 0);
  UseDevice(m.device);
  m.ranker = std::make_unique<Ranker>(ModelOptions(config, pipeline));
  m.ranker->To(TorchDevice(m.device));
  FlatParams flat(m.ranker->dense_module());
  const SafetensorsFile file = SafetensorsFile::Open(ckpt.FilePath("model.safetensors"));
  auto tensors = DenseParamTensors(flat, &file);
  for (size_t c = 0; c < m.ranker->tables().size(); ++c) {
    tensors.emplace_back(TableName(c), m.ranker->tables()[c]);
  }
  for (auto& [name, t] : tensors) CopyFromCheckpoint(file, name, t);
  return m;
}

}  // namespace

RankerEvalResult EvaluateRanker(const Config& config, const fs::path& checkpoint,
                                const std::string& dataset_key, CheckpointChoice choice) {
  const auto started = Clock::now();
  std::unique_ptr<Pipeline> pipeline;
  InferenceModel m = LoadInferenceModel(
      config, checkpoint, choice, [&](std::shared_ptr<const Manifest> statistics) -> const Pipeline& {
        pipeline = EvalPipeline(config, dataset_key, std::move(statistics));
        return *pipeline;
      });
  const RankMetricAccumulator acc = Score(*m.ranker, *pipeline, Precision(config, m.device), 0, m.device);
  RankerEvalResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = static_cast<int64_t>(m.checkpoint.step);
  r.lists = acc.lists();
  r.metrics = MetricsOf(acc);
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

RankerScoreResult ScoreRanker(const Config& config, const fs::path& checkpoint,
                              const fs::path& dataset,
                              const std::function<void(const ScoredBatch&)>& sink,
                              CheckpointChoice choice) {
  const auto started = Clock::now();
  std::unique_ptr<Pipeline> pipeline;
  InferenceModel m = LoadInferenceModel(
      config, checkpoint, choice, [&](std::shared_ptr<const Manifest> statistics) -> const Pipeline& {
        PipelineOptions o = PipelineOptionsFromConfig(config);
        o.shuffle = ShuffleMode::kNone;  // dataset order
        o.drop_last = false;
        o.max_epochs = 1;
        o.on_error = OnError::kFail;  // a skipped row group would shift every later row
        RankingSpec spec = RankingSpecFromConfig(config, "data.train", std::move(statistics));
        spec.dataset = dataset;
        spec.allow_unlabeled = true;
        pipeline = std::make_unique<Pipeline>(spec, o);
        return *pipeline;
      });
  RankerScoreResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = static_cast<int64_t>(m.checkpoint.step);
  const Manifest data = Manifest::Load(dataset);
  r.labeled = std::any_of(data.schema.begin(), data.schema.end(), [&](const ColumnSpec& c) {
    return c.name == m.statistics->label_column;
  });
  const Precision precision(config, m.device);
  const torch::Device to = TorchDevice(m.device);
  torch::NoGradGuard no_grad;
  while (BatchPtr b = pipeline->Next()) {
    const BatchTensors t = WrapHost(*b);
    const auto scores =
        precision
            .Run([&] { return m.ranker->Forward(t.dense.to(to), t.sparse.to(to), /*train=*/false); })
            .scores.to(torch::kCPU, torch::kFloat)
            .contiguous();
    sink({.scores = {scores.data_ptr<float>(), b->num_docs},
          .labels = b->labels(),
          .offsets = b->offsets(),
          .labeled = r.labeled});
    r.lists += b->num_lists;
    r.docs += b->num_docs;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

std::vector<std::string> CheckRankerConfig(const Config& config) {
  std::vector<std::string> out;
  LrSchedule::From(config);  // cross-key rules: warmup below steps, ...
  CheckBestConfig(config);
  const RankLoss loss = ParseRankLoss(config.GetString("model.loss"));
  const std::string train_dir = config.GetString("data.train");
  if (train_dir.empty()) {
    out.push_back("data.train is not set: the data, features and model size were not checked");
    return out;
  }
  auto statistics = std::make_shared<const Manifest>(Manifest::Load(train_dir));
  CheckLabels(*statistics, train_dir, loss);
  // The pipelines resolve every feature chain against the training data's
  // statistics and compare the validation data's schema with it.
  const Pipeline train(RankingSpecFromConfig(config, "data.train"), PipelineOptionsFromConfig(config));
  out.push_back(fmt::format("data.train: {} rows, {} lists; {} dense and {} sparse features",
                            statistics->rows(), statistics->group_stats.groups,
                            train.layout().dense_dim, train.sparse_names().size()));
  if (const std::string& valid = config.GetString("data.valid"); !valid.empty()) {
    EvalPipeline(config, "data.valid", statistics);
    out.push_back(fmt::format("data.valid: {} (same schema)", valid));
  }
  const RankerOptions model = ModelOptions(config, train);
  int64_t rows = 0;
  for (int64_t t : model.table_sizes) rows += t;
  const uint64_t available = AvailableMemoryBytes();
  CheckModelFitsInMemory(config, model, train.sparse_names(), available);
  out.push_back(fmt::format("model: {} dense parameters, {} embedding rows of {}; fits in the {} "
                            "this host has available",
                            RankerDenseParameters(model), rows, model.embedding_dim,
                            FormatBytes(available)));
  return out;
}

RankerTrainResult TrainRanker(const Config& config, const RankerTrainOptions& options) {
  Trainer trainer(config, options);
  return trainer.Run();
}

}  // namespace topspin
