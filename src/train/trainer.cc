#include "train/trainer_core.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/allocator_policy.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"
#include "topspin/core/progress.h"
#include "topspin/perf/tensorboard.h"
#include "topspin/perf/trace.h"
#include "topspin/train/sparse_state.h"
#include "topspin/ddp/zero3.h"
#include "topspin/core/strings.h"
#include "topspin/train/ranker_trainer.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// train.early_stop needs a metric to judge by, and train.best.metric must
// be one the model's evaluation reports.
BestTracker BestFromConfig(const Settings& settings) {
  const TrainConfig& train = settings.train;
  BestTracker b{.metric = train.best.metric,
                .patience = train.early_stop.patience,
                .min_delta = train.early_stop.min_delta};
  const std::vector<std::string> names = TaskMetricNames(settings.model.kind);
  if (b.metric == "auto") b.metric = names.front();
  const std::string& mode = train.best.mode;
  b.max = mode == "auto" ? b.metric != "loss" && b.metric != "perplexity" : mode == "max";
  if (b.metric == "none") {
    if (b.patience > 0) {
      throw ConfigError("train.early_stop.patience needs train.best.metric, which is none",
                        ErrorWhere{.field = "train.early_stop.patience"},
                        "set train.best.metric (auto, ndcg@10, loss, ...), or "
                        "train.early_stop.patience: 0");
    }
  } else if (std::find(names.begin(), names.end(), b.metric) == names.end()) {
    throw ConfigError(fmt::format("train.best.metric {} is not a validation metric of model.kind "
                                  "{} (it reports {})",
                                  b.metric, settings.model.kind, Join(names, ", ")),
                      ErrorWhere{.field = "train.best.metric"},
                      fmt::format("use one of those, or auto ({})", names.front()));
  }
  return b;
}

DenseState::Options DenseOptionsFromConfig(const Settings& settings) {
  const OptimConfig& optim = settings.optim;
  return {.zero = static_cast<int>(settings.dist.zero),
          .optimizer = {.kind = optim.name == "sgd" ? DenseOptimizer::Kind::kSgd
                                                    : DenseOptimizer::Kind::kAdamW,
                        .beta1 = optim.beta1,
                        .beta2 = optim.beta2,
                        .weight_decay = optim.weight_decay,
                        .momentum = optim.momentum,
                        .fused = optim.fused},
          .bucket_bytes = settings.dist.bucket_mib << 20,
          .overlap = settings.dist.overlap};
}

}  // namespace

void ApplyProcessPolicy(int64_t torch_threads) {
  KeepHeapMemory();     // reuse each step's temporaries instead of re-faulting them
  LimitBlasThreads(1);  // LibTorch's intra-op threads parallelise; OpenBLAS would spin
  if (torch_threads > 0) torch::set_num_threads(static_cast<int>(torch_threads));
}

Trainer::Trainer(const Config& config, const TrainOptions& options)
    : config_(config),
      settings_(Settings::From(config)),
      options_(options),
      device_(ResolveDevice(settings_.train.device, VisibleGpus(), options.launch.local_rank)),
      schedule_(settings_.optim, settings_.train),
      precision_(settings_.train, device_),
      store_(options.run_dir / "checkpoints",
             {.keep_last = static_cast<size_t>(settings_.train.keep_checkpoints)}) {
  CheckKeysApply(config);
  best_ = BestFromConfig(settings_);
  const LaunchEnv& env = options.launch;
  UseDevice(device_);
  AllowTf32(device_, settings_.train.tf32);
  device_timer_ = std::make_unique<DeviceTimer>(device_);
  phases_.device = device_timer_.get();
  if (env.world_size > 1) {
    if (device_.cuda && settings_.dist.backend == "gloo") {
      throw ConfigError("dist.backend gloo cannot sum the gradients of a GPU run",
                        ErrorWhere{.field = "dist.backend"},
                        "use dist.backend auto (NCCL on GPUs), or train.device cpu");
    }
    RendezvousOptions rendezvous = options.rendezvous;
    rendezvous.backend = settings_.dist.backend;
    rendezvous.cuda_device = device_.index;
    comm_ = Comm::Connect(env, rendezvous);
  }
  if (options.trace) {
    phases_.trace = options.trace;
    step_track_ = options.trace->Track(fmt::format("rank {} steps", env.rank));
    phases_.track = options.trace->Track(fmt::format("rank {} phases", env.rank));
  }
  peaks_ = ResolvePeaks(options, device_, precision_.bf16());
  std::optional<Checkpoint> ckpt;
  if (!options.trial) ckpt = FindCheckpoint();
  PipelineState start;
  if (ckpt) {
    const auto meta = nlohmann::json::parse(ckpt->meta_json);
    const auto& p = meta.at("pipeline");
    start = {p.at("seed").get<uint64_t>(), p.at("epoch").get<uint64_t>(),
             p.at("next_batch").get<uint64_t>()};
  }
  task_ = MakeTask({.settings = settings_,
                    .device = device_,
                    .comm = comm_.get(),
                    .rank = env.rank,
                    .world_size = env.world_size,
                    .start = start,
                    .trace = options.trace});

  const DenseState::Options dense = DenseOptionsFromConfig(settings_);
  dense_ = std::make_unique<DenseState>(
      task_->dense_module(), comm_.get(), dense,
      comm_ && dense.zero >= 3 ? task_->Units() : std::vector<std::vector<at::Tensor>>{});
  if (dense_->zero3() != nullptr) task_->BracketUnits(*dense_->zero3());
  sparse_ = task_->sparse();
  if (ckpt) {
    Restore(*ckpt);
  } else if (!options.init_from.empty()) {
    InitFrom(options.init_from);
  }
  if (!leader() || options.trial) return;  // rank 0 alone writes metrics
  fs::create_directories(options.run_dir);
  sinks_.Add(std::make_unique<JsonlWriter>(options.run_dir / "metrics.jsonl"));
  // One event file per process and start step: a resumed run (even within
  // the second its predecessor started) never collides with an old file.
  sinks_.Add(std::make_unique<TensorBoardWriter>(options.run_dir / "tb",
                                                 fmt::format(".{}.from{}", ::getpid(), step_)));
}

TrainResult Trainer::Run() {
  const int64_t steps = settings_.train.steps;
  ProgressOptions po;
  po.unit = "steps";
  po.interval_s = settings_.run.progress_interval_s;
  if (!leader()) po.sink = [](const std::string&) {};  // rank 0 shows progress
  Progress progress("train", static_cast<uint64_t>(steps), po);
  progress.Update(static_cast<uint64_t>(step_));
  const auto started = Clock::now();
  Window window{.start = started, .phases = phases_.seconds, .stage_busy = {}};
  int64_t run_steps = 0, run_items = 0;
  bool first_record = true;
  TraceRecorder* trace = options_.trace;
  while (step_ < steps) {
    const double step_start = trace ? trace->Now() : 0;
    const auto [loss, items] = Step();
    if (trace) {
      trace->Complete(step_track_, fmt::format("step {}", step_ + 1), "step", step_start,
                      trace->Now() - step_start);
    }
    window.loss += loss;
    window.items += items;
    run_items += items;
    ++window.steps;
    ++step_;
    ++run_steps;
    progress.Update(static_cast<uint64_t>(step_));
    const bool dying = options_.stop_after_steps > 0 && run_steps >= options_.stop_after_steps;
    if (EndOfStep(window, dying, first_record) || dying || stop_) break;
  }
  progress.Finish();
  Finish(started, run_steps, double(run_items));
  return result_;
}

Trainer::TrialSteps Trainer::RunTrialSteps(int64_t steps) {
  TrialSteps t;
  const double wait_before = phases_.seconds["data_wait"];
  // The window holds exactly these steps' device work: a step ends with
  // its update still queued on a GPU.
  SynchronizeDevice(device_);
  const auto start = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    t.items += Step().second;
    ++step_;
  }
  SynchronizeDevice(device_);
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  t.data_wait_s = phases_.seconds["data_wait"] - wait_before;
  return t;
}

// After step step_: a stop request's checkpoint, or the step's evaluation
// (train.eval_every, the last step) and checkpoint (train.checkpoint_every,
// the last step, a new best, an early stop); then its log record. They run
// before the record, so their time is in the window they happened in, and
// the record is on disk (fdatasync) with the checkpoint. True: stop early.
bool Trainer::EndOfStep(Window& window, bool dying, bool& first_record) {
  const int64_t steps = settings_.train.steps;
  const int64_t eval_every = settings_.train.eval_every;
  const int64_t ckpt_every = settings_.train.checkpoint_every;
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
  if (step_ % settings_.train.log_every == 0 || step_ == steps || stop_early) {
    WriteRecord(window, first_record);
    first_record = false;
  }
  if (checkpointed && leader()) {
    // The metrics up to this step are as durable as the checkpoint.
    const PhaseTimer timer = phases_.Time("checkpoint");
    sinks_.Flush();
  }
  if (stop_early) spdlog::info("stopping early at step {}: {}", step_, result_.early_stop);
  return stop_early;
}

// One optimizer step; returns (loss, items) of the global batch.
//
// Host synchronisation: one read-back of [loss sum, squared gradient
// norm, non-finite count] per step (on the CPU, free). With several ranks
// the loss sum is read as the last backward starts, because the step's
// totals travel (over Gloo) during it.
std::pair<double, int64_t> Trainer::Step() {
  std::optional<PhaseTimer> optimizer;
  StepTotals t;
  t.tensor = torch::zeros({4 + world()}, torch::kDouble);
  t.at = t.tensor.data_ptr<double>();
  // Sync is the time blocked on collectives, exactly: the exchange's own
  // work (packing and summing rows, staging) is the update's preparation.
  auto& phase = phases_.seconds;
  const double sync_before = phase["sync"];
  const double blocked_before = comm_ ? comm_->blocked_seconds() : 0;
  const auto settle_sync = [&] {
    if (!comm_) return;
    const double moved = (phase["sync"] - sync_before) - (comm_->blocked_seconds() - blocked_before);
    phase["sync"] -= moved;
    phase["optimizer"] += moved;
  };
  Accumulate(t);
  Exchange(t);
  stop_ = t.at[3] > 0;
  const double terms = std::max(1.0, t.at[1]);
  const auto items = static_cast<int64_t>(t.at[2]);
  phases_.Begin(optimizer, "optimizer", /*on_device=*/true);
  // This rank's part of the dense gradient sum: all of it, or with ZeRO-2/3
  // the shard it owns (and the others' squares are summed in). It is
  // divided by the terms inside the optimizer's pass, not before.
  const auto [sq, loss_sum] = ReadBack(dense_->grads(), terms, t.loss_sum);
  if (!comm_) t.at[0] = loss_sum;
  const double loss = t.at[0] / terms;
  if (Health(loss, sq)) {
    Update(terms, sq);
  } else {
    dense_->ZeroGrad();
  }
  settle_sync();
  return {loss, items};
}

// The micro-batches of one step: forward, loss, backward. The totals
// [loss sum, loss terms, items, stop request, then at 4 + rank the
// embedding rows this rank will gather (SparseRowCount)] are summed over
// ranks while the last backward runs, so the row gather needs no size
// exchange.
void Trainer::Accumulate(StepTotals& t) {
  const int64_t accum = settings_.optim.grad_accum;
  for (int64_t a = 0; a < accum; ++a) {
    task_->NextBatch(phases_);
    // Declared first, so freeing this micro-batch's graph and activations
    // (at the end of the iteration) counts as backward.
    std::optional<PhaseTimer> backward, forward;
    phases_.Begin(forward, "forward", /*on_device=*/true);
    const LossTerms terms = task_->Forward(precision_);
    forward.reset();
    t.loss_sum = t.loss_sum.defined() ? t.loss_sum + terms.sum.detach() : terms.sum.detach();
    t.at[1] += double(terms.count);
    t.at[2] += double(terms.items);
    if (comm_ && a + 1 == accum) {
      t.at[0] = t.loss_sum.item<double>();
      t.at[3] = StopRequested();
      if (sparse_) t.at[4 + comm_->rank()] = double(sparse_->RowsToGather());
      t.work = comm_->AllReduceSumAsync(t.tensor);
      dense_->Arm();
    }
    phases_.Begin(backward, "backward", /*on_device=*/true);
    terms.sum.backward();
    task_->EndMicroBatch();
  }
  if (sparse_) sparse_->Collect();
}

// The gradient exchange after backward: the totals, the embedding rows
// (on the wire first) and the dense buckets (awaited while the rows
// travel). One process: only the stop request.
void Trainer::Exchange(StepTotals& t) {
  if (!comm_) {
    t.at[3] = StopRequested();
    return;
  }
  const PhaseTimer sync = phases_.Time("sync");
  t.work.Wait();
  if (!sparse_) {
    dense_->Finish();
    return;
  }
  std::vector<int64_t> sparse_rows(static_cast<size_t>(world()));
  for (int r = 0; r < world(); ++r) sparse_rows[size_t(r)] = int64_t(t.at[4 + r]);
  sparse_->Sync(sparse_rows, [&] { dense_->Finish(); });
}

double Trainer::StopRequested() const {
  return options_.stop_requested && options_.stop_requested() ? 1.0 : 0.0;
}

// The one read-back of the step: the squared norm of the gradient (the
// dense sum divided by the terms, and the embedding rows, divided here),
// in double on the device, and the loss sum. A non-finite element makes
// the norm non-finite, so finiteness needs no pass of its own.
std::pair<double, double> Trainer::ReadBack(const at::Tensor& dense, double terms,
                                            const at::Tensor& loss_sum) {
  at::Tensor dense_sq = SquaredNorm(dense);
  if (dense_->sharded_grads()) comm_->AllReduceSum(dense_sq);  // the shards' parts
  at::Tensor rows_sq = torch::zeros({1}, dense_sq.options());
  if (sparse_) {
    for (auto& r : sparse_->rows()) {
      r.grads.div_(terms);
      rows_sq += SquaredNorm(r.grads);
    }
  }
  const auto host = torch::cat({dense_sq / (terms * terms) + rows_sq,
                                loss_sum.to(torch::kDouble).reshape({1})})
                        .to(torch::kCPU)
                        .contiguous();
  const double* h = host.data_ptr<double>();
  return {h[0], h[1]};
}

// Clipping (optim.clip_norm, the global norm over dense and rows) and the
// dense and sparse updates. The dense gradient's division by the terms and
// its clipping are one scale the optimizer applies as it reads it.
void Trainer::Update(double terms, double sq) {
  const double clip = settings_.optim.clip_norm;
  const double norm = std::sqrt(sq);
  window_grad_norm_ += norm;  // before clipping
  ++window_grad_steps_;
  double scale = 1.0 / terms;
  if (clip > 0 && norm > clip) {
    const double clipped = clip / (norm + 1e-6);
    scale *= clipped;
    if (sparse_) {
      for (auto& r : sparse_->rows()) r.grads.mul_(clipped);
    }
  }
  const double lr = schedule_.At(step_);
  dense_->Step(lr, scale);  // leaves the gradient zero
  bytes_moved_ += dense_->StepBytes();
  if (sparse_) {
    sparse_->Step(settings_.optim.sparse_lr *
                  (schedule_.peak_lr() > 0 ? lr / schedule_.peak_lr() : 1.0));
    bytes_moved_ += sparse_->StepBytes();
  }
}

// This rank's non-finite gradient elements, dense and rows (only for the
// message of a skipped step).
int64_t Trainer::NonFiniteGradients() {
  int64_t bad = CountNonFinite(dense_->grads());
  if (sparse_) {
    for (const auto& r : sparse_->rows()) bad += CountNonFinite(r.grads);
  }
  return bad;
}

// False for a step to skip (a non-finite loss or gradient); throws after
// train.max_bad_steps of them in a row.
bool Trainer::Health(double loss, double sq) {
  if (std::isfinite(loss) && std::isfinite(sq)) {
    bad_in_a_row_ = 0;
    return true;
  }
  ++result_.skipped_steps;
  const int64_t bad = NonFiniteGradients();
  if (++bad_in_a_row_ >= settings_.train.max_bad_steps) {
    throw DataError(fmt::format("training diverged: {} steps in a row had a non-finite loss or "
                                "gradient (last at step {}: loss {}, {} non-finite gradient "
                                "elements on this rank, gradient norm {})",
                                bad_in_a_row_, step_, loss, bad, std::sqrt(sq)),
                    ErrorWhere{.field = "train.max_bad_steps"},
                    "lower optim.lr or optim.sparse_lr, or set optim.clip_norm");
  }
  spdlog::warn("step {}: non-finite loss or gradient; step skipped ({} in a row)", step_,
               bad_in_a_row_);
  return false;
}

TrainResult Train(const Config& config, const TrainOptions& options) {
  try {
    Trainer trainer(config, options);
    return trainer.Run();
  } catch (const Error& e) {
    throw config.Locate(e);
  }
}

RankerTrainResult TrainRanker(const Config& config, const RankerTrainOptions& options) {
  return Train(config, options);
}

std::vector<std::string> CheckTrainConfig(const Config& config) {
  try {
    CheckKeysApply(config);
    const Settings settings = Settings::From(config);
    LrSchedule(settings.optim, settings.train);  // cross-key rules: warmup below steps, ...
    BestFromConfig(settings);
    return settings.model.kind == "gpt" ? CheckGptConfig(settings) : CheckRankerConfig(settings);
  } catch (const Error& e) {
    throw config.Locate(e);
  }
}

}  // namespace topspin
