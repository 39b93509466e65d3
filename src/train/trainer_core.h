// The trainer core: one step loop for every Task (see topspin/train/trainer.h
// for what a run does, src/train/task.h for what a Task provides). Its
// members are defined in trainer.cc (construction, the loop, the step),
// trainer_state.cc (evaluation and its verdict, checkpoints, resume) and
// trainer_outputs.cc (log windows, profile.json, summary.json).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "topspin/core/config.h"
#include "topspin/core/config_schema.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/ddp/comm.h"
#include "topspin/perf/metrics_sink.h"
#include "topspin/train/dense_state.h"
#include "topspin/train/lr_schedule.h"
#include "topspin/train/trainer.h"
#include "train/phases.h"
#include "train/precision.h"
#include "train/task.h"

namespace topspin {

// The process-wide peaks MFU and the roofline are measured against.
struct Peaks {
  double flops = 0;  // 0: unknown
  double bytes_per_s = 0;
  std::string source;
};
Peaks ResolvePeaks(const TrainOptions& options, const ComputeDevice& device, bool bf16);

// train.best and train.early_stop, and the best evaluation so far.
struct BestTracker {
  std::string metric;  // ndcg@10, loss, ... ("none": no judging)
  bool max = true;
  int64_t patience = 0;
  double min_delta = 0;
  int64_t step = -1;  // -1: no evaluation yet
  double value = NAN;
  int64_t evals_since = 0;  // evaluations since the best
};

class Trainer {
 public:
  Trainer(const Config& config, const TrainOptions& options);
  TrainResult Run();

  // The AutoTuner's trials (options.trial): `steps` optimizer steps with
  // no evaluation, checkpoint or log record.
  struct TrialSteps {
    double seconds = 0, data_wait_s = 0;
    int64_t items = 0;
  };
  TrialSteps RunTrialSteps(int64_t steps);
  Task& task() { return *task_; }
  const ComputeDevice& device() const { return device_; }

 private:
  struct Verdict {
    bool best = false, stop = false;
  };
  // The running totals of one log window.
  struct Window {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    double loss = 0;
    int64_t steps = 0, items = 0;
    // Phase and loader-stage totals when the window began: each record
    // carries the window's share of them (the report's stacked bars). The
    // loader's counters start with the pipeline, which works ahead while the
    // model is built: the first window counts that work too.
    std::map<std::string, double> phases, stage_busy;
  };


  bool leader() const { return !comm_ || comm_->rank() == 0; }
  int world() const { return comm_ ? comm_->world_size() : 1; }

  // One step's totals, summed over ranks (trainer.cc).
  struct StepTotals {
    at::Tensor tensor;  // [4 + world] double
    double* at = nullptr;
    CommWork work;
    at::Tensor loss_sum;  // on the device, summed over micro-batches
  };

  // trainer.cc
  bool EndOfStep(Window& window, bool dying, bool& first_record);
  std::pair<double, int64_t> Step();
  void Accumulate(StepTotals& totals);
  void Exchange(StepTotals& totals);
  double StopRequested() const;
  std::pair<double, double> ReadBack(const at::Tensor& dense, double terms,
                                     const at::Tensor& loss_sum);
  bool Health(double loss, double sq);
  int64_t NonFiniteGradients();
  void Update(double terms, double sq);

  // trainer_state.cc
  Verdict EvaluateAllRanks();
  Verdict Judge(const Evaluation& evaluation);
  void CheckpointAllRanks();
  void SaveCheckpoint(const NamedTensors& state);
  nlohmann::json CheckpointMeta() const;
  std::optional<Checkpoint> FindCheckpoint();
  void Restore(const Checkpoint& c);
  void CheckExtension(const Checkpoint& c, const nlohmann::json& meta);
  void InitFrom(const std::filesystem::path& path);

  // trainer_outputs.cc
  void WriteRecord(Window& window, bool first_record);
  double WindowPhases(const std::map<std::string, double>& start, double secs, int64_t steps,
                      MetricValues& record) const;
  std::map<std::string, double> StageBusy() const;
  std::map<std::string, double> WindowStages(const std::map<std::string, double>& start,
                                             double secs, MetricValues& record) const;
  void Finish(std::chrono::steady_clock::time_point started, int64_t run_steps, double run_items);
  void WriteProfile(int64_t steps, double wall_s, double items);
  void WriteSummary() const;

  const Config& config_;  // its hash and text go into checkpoints
  const Settings settings_;  // config_, typed: what the run reads
  TrainOptions options_;
  ComputeDevice device_;  // train.device, resolved
  LrSchedule schedule_;
  Precision precision_;
  CheckpointStore store_;
  std::unique_ptr<Comm> comm_;  // several ranks only
  std::unique_ptr<DeviceTimer> device_timer_;  // phases on the GPU (CUDA only)
  Phases phases_;
  int step_track_ = 0;
  std::unique_ptr<Task> task_;
  std::unique_ptr<DenseState> dense_;
  SparseState* sparse_ = nullptr;  // the Task's, or null
  Peaks peaks_;
  double bytes_moved_ = 0;
  double window_grad_norm_ = 0;  // sum over the log window's finite steps
  int64_t window_grad_steps_ = 0;
  bool stop_ = false;
  MultiSink sinks_;
  int64_t step_ = 0, bad_in_a_row_ = 0;
  std::filesystem::path init_from_;  // the checkpoint --init-from copied the weights of
  BestTracker best_;
  TrainResult result_;
};

}  // namespace topspin
