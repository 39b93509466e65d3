#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/files.h"
#include "topspin/perf/profile.h"
#include "train/torch_device.h"
#include "train/trainer_core.h"

namespace topspin {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void SynchronizeDevice(const ComputeDevice& d) {
  if (d.cuda) torch::cuda::synchronize(static_cast<int64_t>(d.index));
}

// Memory bandwidth (read + write bytes per second) of a 64 MiB copy on the
// device, pages touched first: the roof for the embedding-row traffic.
double MeasureCopyBandwidth(const ComputeDevice& device) {
  const auto o = torch::TensorOptions().device(TorchDevice(device));
  const auto a = torch::ones({int64_t{16} << 20}, o), b = torch::zeros({int64_t{16} << 20}, o);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    SynchronizeDevice(device);
    const auto start = Clock::now();
    b.copy_(a);
    SynchronizeDevice(device);
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
                     .dtype(bf16 ? torch::kBFloat16 : torch::kFloat);
  const auto a = torch::randn({n, n}, o), b = torch::randn({n, n}, o);
  (void)torch::mm(a, b);  // warm up
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    SynchronizeDevice(device);
    const auto start = Clock::now();
    for (int i = 0; i < 4; ++i) (void)torch::mm(a, b);
    SynchronizeDevice(device);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 4 * 2.0 * double(n) * double(n) * double(n) / s);
  }
  return best;
}

Peaks ResolvePeaks(const TrainOptions& options, const ComputeDevice& device, bool bf16) {
  Peaks p;
  if (options.peak_gbs > 0) {
    p.bytes_per_s = options.peak_gbs * 1e9;
  } else if (options.measure_peak) {
    p.bytes_per_s = MeasureCopyBandwidth(device);
  }
  if (options.peak_tflops > 0) {
    p.flops = options.peak_tflops * 1e12;
    p.source = "given";
  } else if (options.measure_peak) {
    p.flops = MeasureMatmulPeak(device, bf16);
    p.source = device.cuda ? fmt::format("measured: 4096^3 {} matmul on {}", bf16 ? "bf16" : "fp32",
                                         device.Name())
                           : fmt::format("measured: 1024^3 fp32 matmul on {} threads",
                                         torch::get_num_threads());
  }
  return p;
}

// One record of metrics.jsonl for the window that ends at this step.
void Trainer::WriteRecord(Window& w, bool first_record) {
  const PhaseTimer timer = phases_.Time("log");
  device_timer_->Collect(phases_.seconds, /*wait=*/true);  // CUDA: the window's GPU phases
  const double secs = std::chrono::duration<double>(Clock::now() - w.start).count();
  result_.last_loss = w.loss / double(w.steps);
  MetricValues record = {{"loss", result_.last_loss},
                         {"lr", schedule_.At(step_ - 1)},
                         {"skipped_steps", double(result_.skipped_steps)}};
  // The report marks where a resumed run took over.
  if (first_record && result_.resumed_from >= 0) {
    record["resumed_from"] = double(result_.resumed_from);
  }
  // The window's mean global gradient norm, before clipping.
  if (window_grad_steps_ > 0) record["grad_norm"] = window_grad_norm_ / double(window_grad_steps_);
  window_grad_norm_ = 0;
  window_grad_steps_ = 0;
  const double paused = WindowPhases(w.phases, secs, w.steps, record);
  record[fmt::format("{}_per_s", task_->unit())] = double(w.items) / std::max(1e-9, secs - paused);
  w.stage_busy = WindowStages(w.stage_busy, secs, record);
  // Row groups loaded again for the same epoch so far: above 0, the cache
  // is too small for the shuffle (the pipeline also warns).
  record["loader_reloads"] = double(task_->training_pipeline().Stats().cache_reloads);
  sinks_.Write(step_, record, WallTimeNow());
  w.phases = phases_.seconds;
  w.loss = 0;
  w.steps = w.items = 0;
  w.start = Clock::now();
}

// Adds "phase_ms/<phase>" (ms per step of the window, `other` the wall
// time no phase claims) to `record`; returns the window's evaluation and
// checkpoint seconds, which its throughput leaves out.
double Trainer::WindowPhases(const std::map<std::string, double>& start, double secs, int64_t steps,
                    MetricValues& record) const {
  double claimed = 0, paused = 0;
  for (const auto& phase : ProfilePhases()) {
    if (phase == "other") continue;
    const auto now = phases_.seconds.find(phase);
    const auto then = start.find(phase);
    const double delta = (now == phases_.seconds.end() ? 0.0 : now->second) -
                         (then == start.end() ? 0.0 : then->second);
    claimed += delta;
    if (phase == "eval" || phase == "checkpoint") paused += delta;
    record["phase_ms/" + phase] = 1e3 * delta / double(steps);
  }
  record["phase_ms/other"] = 1e3 * std::max(0.0, secs - claimed) / double(steps);
  return paused;
}

// Seconds each loader stage has been busy, summed over its threads.
std::map<std::string, double> Trainer::StageBusy() const {
  std::map<std::string, double> busy;
  for (const auto& st : task_->LoaderStages()) busy[st.name] = st.busy_s;
  return busy;
}

// Adds "loader_busy/<stage>": the share of the loader threads' time over
// the window that each stage kept busy (1 = every thread, all the time).
// Returns the stages' busy seconds now: the next window's start.
std::map<std::string, double> Trainer::WindowStages(const std::map<std::string, double>& start,
                                           double secs, MetricValues& record) const {
  const double thread_s = secs * double(settings_.pipeline.threads);
  std::map<std::string, double> now = StageBusy();
  if (thread_s <= 0) return now;
  for (const auto& [name, busy] : now) {
    const auto then = start.find(name);
    record["loader_busy/" + name] = (busy - (then == start.end() ? 0.0 : then->second)) / thread_s;
  }
  return now;
}

void Trainer::Finish(Clock::time_point started, int64_t run_steps, double run_items) {
  device_timer_->Collect(phases_.seconds, /*wait=*/true);
  sinks_.Flush();
  result_.step = step_;
  result_.best_step = best_.step;
  result_.best_value = best_.value;
  result_.best_metric = best_.metric;
  result_.unit = task_->unit();
  result_.dense_params = dense_->numel();
  result_.dense_param_bytes = dense_->param_bytes();
  result_.dense_optimizer_bytes = dense_->optimizer_bytes();
  result_.dense_grad_bytes = dense_->grad_bytes();
  result_.grad_staging_peak_bytes = dense_->staging_peak_bytes();
  result_.phase_s = phases_.seconds;
  // Training throughput: wall time less evaluation and checkpoints.
  const double wall = std::chrono::duration<double>(Clock::now() - started).count();
  const double busy = wall - phases_.seconds["eval"] - phases_.seconds["checkpoint"];
  result_.items_per_s = busy > 0 ? run_items / busy : 0;
  if (leader() && run_steps > 0) WriteProfile(run_steps, wall, run_items);
  if (leader()) WriteSummary();
}

// RUN_DIR/profile.json: the phases of this run's steps, with the FLOPs,
// memory traffic and loader use `topspin profile` analyses.
void Trainer::WriteProfile(int64_t steps, double wall_s, double items) {
  StepProfile p;
  p.steps = steps;
  p.wall_s = wall_s;
  p.phase_s = phases_.seconds;
  double claimed = 0;
  for (const auto& [name, secs] : p.phase_s) claimed += secs;
  p.phase_s["other"] = std::max(0.0, wall_s - claimed);
  p.items = items;
  p.unit = task_->unit();
  p.world_size = world();
  p.flops_per_item = task_->TrainFlopsPerItem();
  p.peak_flops = peaks_.flops;
  p.peak_source = peaks_.source;
  p.peak_bytes_per_s = peaks_.bytes_per_s;
  p.bytes_per_step = bytes_moved_ / double(std::max<int64_t>(1, steps));
  p.loader_threads = static_cast<int>(settings_.pipeline.threads);
  for (const auto& st : task_->LoaderStages()) p.stages.push_back({st.name, st.busy_s});
  const ProfileReport report = Analyze(p);
  WriteFileAtomic(options_.run_dir / kProfileFile, ProfileJson(p, report));
  result_.profile = p;
}

// RUN_DIR/summary.json: what `topspin train` prints at the end, for
// scripts and benchmarks (rank 0's figures; NaN is null).
void Trainer::WriteSummary() const {
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; };
  const TrainResult& r = result_;
  nlohmann::json j{{"step", r.step},
                   {"resumed_from", r.resumed_from},
                   {"stopped_by_signal", r.stopped},
                   {"early_stop", r.early_stop},
                   {"unit", r.unit},
                   {"items_per_s", r.items_per_s},
                   {"valid", r.valid},
                   {"last_loss", number(r.last_loss)},
                   {"valid_ndcg10", number(r.valid_ndcg10)},
                   {"skipped_steps", r.skipped_steps},
                   {"phase_s", r.phase_s},
                   {"dense_params", r.dense_params},
                   {"dense_param_bytes", r.dense_param_bytes},
                   {"dense_optimizer_bytes", r.dense_optimizer_bytes},
                   {"dense_grad_bytes", r.dense_grad_bytes},
                   {"grad_staging_peak_bytes", r.grad_staging_peak_bytes},
                   {"world_size", world()},
                   {"zero", dense_->zero()},
                   {"checkpoint", r.checkpoint.string()}};
  if (r.best_step >= 0) {
    j["best"] = {{"step", r.best_step}, {"metric", r.best_metric}, {"value", number(r.best_value)}};
  }
  WriteFileAtomic(options_.run_dir / "summary.json", j.dump(2) + "\n");
}

std::string DescribePhases(const TrainResult& r) {
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

}  // namespace topspin
