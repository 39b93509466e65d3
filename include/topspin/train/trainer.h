// Training any workload from a declarative config (`topspin train`): the
// trainer core (src/train/trainer.cc) drives the Task that model.kind
// names (ranker: src/train/ranker_task.cc; gpt: src/train/gpt_task.cc).
//
// One optimizer step: optim.grad_accum micro-batches from the Task's input
// pipeline, forward and loss (sums over loss terms), backward into the flat
// gradient buffer (and a sparse Task's gathered embedding rows), the
// gradient exchange with several ranks (buckets overlapped with backward;
// dist.zero 1/2/3 shard optimizer state, gradients, parameters), a
// finiteness check (a non-finite loss or gradient skips the step and counts
// it; train.max_bad_steps in a row stop the run with Error{kData}), the
// global gradient-norm clip (optim.clip_norm), the dense optimizer over the
// flat buffer and the row-wise sparse updates (optim.sparse, optim.sparse_lr,
// following the same schedule shape as optim.lr).
//
// Outputs in the run directory: metrics.jsonl and tb/ (TensorBoard), one
// record every train.log_every steps (loss, lr, <unit>_per_s, phases) and
// at each evaluation (valid/<metric>); checkpoints/ (step-N/: safetensors
// of the parameters, optimizer state and embedding tables, plus a manifest
// with the step, the config hash and the pipeline state) every
// train.checkpoint_every steps and at the end; profile.json; summary.json.
//
// Best checkpoint and early stopping: each evaluation that improves
// train.best.metric (max or min: train.best.mode) by more than
// train.early_stop.min_delta is checkpointed at once and kept whatever
// train.keep_checkpoints; RUN_DIR/best.json names it and the evaluation
// records carry "best_step". train.early_stop.patience > 0 evaluations in a
// row without one stop the run after a checkpoint (result.early_stop says
// why). With several ranks, rank 0 judges and broadcasts the verdict.
//
// Resume: `resume = "auto"` continues from the newest complete, intact
// checkpoint in the run directory (a damaged newest one falls back to the
// previous, with a warning), or from the directory named. The continued
// run is bitwise identical to one never interrupted: the pipeline resumes
// at its saved position and every tensor the step depends on is restored.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "topspin/core/config.h"
#include "topspin/dist/launch_env.h"
#include "topspin/dist/rendezvous.h"
#include "topspin/perf/profile.h"

namespace topspin {

class TraceRecorder;

struct TrainOptions {
  std::filesystem::path run_dir;
  std::string resume;  // "": fresh; "auto": newest checkpoint in run_dir; else a checkpoint dir
  // With resume: the config may differ from the checkpoint's in a larger
  // train.steps only (a finished run trained on). The learning-rate
  // schedule becomes the one over the new train.steps (a decayed cosine or
  // linear rate rises to where the longer schedule stands at that step;
  // the log says both); config.yaml is rewritten with the new steps.
  bool extend = false;
  // Without a checkpoint to resume: start from this checkpoint's weights (a
  // run directory's newest, or a step-N directory) with any config whose
  // model has the same shapes. Dense parameters and embedding tables are
  // copied; optimizer state, step, schedule and data order start fresh.
  std::filesystem::path init_from;
  // Tests: leave the loop after this many steps of this process, as if the
  // process died (no final checkpoint, no final evaluation). 0: off.
  int64_t stop_after_steps = 0;
  // Checked after every step: true stops the run after a checkpoint (SIGINT
  // or SIGTERM). With several ranks, a stop asked on any rank stops all of
  // them after the same step.
  std::function<bool()> stop_requested;
  // Data parallel: world_size > 1 joins the job (topspin/ddp/comm.h). Every
  // rank reads its slice of each global batch (data.train, pipeline
  // .batch_size lists in all), gradients are summed over ranks (dense in
  // buckets overlapped with backward, embedding rows sparsely), and the
  // loss is the global batch's: the run does not depend on how the batch
  // was split. Rank 0 alone writes metrics, evaluates and checkpoints.
  // dist.zero 1 shards the dense optimizer state (ZeRO-1); checkpoints hold
  // the whole state and load at any world size.
  LaunchEnv launch;
  RendezvousOptions rendezvous;
  // Profiling: every phase of every step becomes a span on `trace`
  // (perf/trace.h) when set. MFU needs a peak: `peak_tflops` > 0 gives it,
  // else `measure_peak` times a matmul at start; neither: no MFU. The
  // roofline also needs the memory bandwidth: `peak_gbs` > 0 gives it (GB/s),
  // else `measure_peak` times a copy.
  TraceRecorder* trace = nullptr;
  double peak_tflops = 0;
  double peak_gbs = 0;
  bool measure_peak = false;
  // The AutoTuner's trials (topspin/train/tune.h): no checkpoint is looked
  // for or written, nothing is written to run_dir, and the steps are run by
  // the tuner, not by Train.
  bool trial = false;
};

struct TrainResult {
  int64_t step = 0;                  // steps completed (the next step to run)
  int64_t resumed_from = -1;         // checkpoint step, or -1
  double last_loss = NAN;            // mean loss of the last logged window
  double valid_ndcg10 = NAN;         // ranker: last evaluation's NDCG@10 (NaN without data.valid)
  // The last evaluation's metrics (valid/<name> in metrics.jsonl).
  std::map<std::string, double> valid;
  std::string unit = "docs";         // what items counts: docs (ranker), tokens (GPT)
  double items_per_s = 0;            // training items per second in this process
  int64_t skipped_steps = 0;         // non-finite steps skipped
  bool stopped = false;              // ended early by stop_requested
  int64_t dense_params = 0;          // P, elements of the flat parameter buffer
  int64_t dense_param_bytes = 0;     // this rank's parameter storage: 4P, 4P/world with ZeRO-3
  // This rank's dense optimizer state: 8P bytes for AdamW, 8P/world with
  // dist.zero 1 (ZeRO-1), rounded up to whole shards.
  int64_t dense_optimizer_bytes = 0;
  // This rank's dense gradient storage: 4P bytes, 4P/world with dist.zero 2
  // (ZeRO-2), which also holds buckets in flight: at most
  // grad_staging_peak_bytes at once.
  int64_t dense_grad_bytes = 0;
  int64_t grad_staging_peak_bytes = 0;
  std::filesystem::path checkpoint;  // the last checkpoint written, or the one resumed from
  // train.best: the step of the best evaluation (checkpointed, kept whatever
  // train.keep_checkpoints, named in RUN_DIR/best.json), -1 without one.
  int64_t best_step = -1;
  double best_value = NAN;
  std::string best_metric;  // "ndcg@10", ...
  // Non-empty when train.early_stop ended the run: why.
  std::string early_stop;
  // Wall seconds of this process by phase: data_wait (blocked on the input
  // pipeline), forward, backward, sync (waiting for gradient exchange that
  // backward did not hide; several ranks only), optimizer (finiteness
  // check, clipping, dense and sparse updates), eval, checkpoint.
  std::map<std::string, double> phase_s;
  // What the steps of this run measured (rank 0; also RUN_DIR/profile.json).
  StepProfile profile;
};

// Which checkpoint of a run directory eval, score and --init-from use: the
// best (RUN_DIR/best.json, train.best; the newest when there is none) or
// the newest. A step-N directory is used as it is.
enum class CheckpointChoice { kBest, kLatest };

// Process-wide policy, set once by the program at start-up (not by a
// library constructor): freed heap memory kept for reuse (each step's
// temporaries are not re-faulted), OpenBLAS single-threaded (LibTorch's
// intra-op threads parallelise; OpenBLAS threads would spin), and
// train.torch_threads LibTorch threads (0: one per core).
void ApplyProcessPolicy(int64_t torch_threads);

// Trains the model.kind of `config`.
TrainResult Train(const Config& config, const TrainOptions& options);

// What training checks before it allocates anything, without training
// (`topspin config check`): the cross-key rules, the data and whether the
// model fits; throws the error training would; one line per check passed.
std::vector<std::string> CheckTrainConfig(const Config& config);

// "data wait 2.1% (0.21 s), forward 31.0% (3.10 s), ..." in phase order.
std::string DescribePhases(const TrainResult& result);

}  // namespace topspin
