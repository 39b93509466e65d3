// The AutoTuner's search (`topspin tune`): which loader threads, prefetch
// depth, compute threads, pinned memory and micro-batch make a training
// step fastest and safe, decided from short controlled trials.
//
// This header is the method, without LibTorch: a TrialRunner runs the real
// step (src/train/tune.cc) or a simulation (the tests), and the search
// decides from what it measures.
//
// Throughput (TuneThroughput). A trial is a number of fixed measurement
// windows of one setting, after a warm-up the runner discards; more windows
// are taken until the standard error of the mean is known to within
// `target_rse` (or `max_windows`). The search starts low (one loader
// thread, shallow prefetch) and climbs where the measurements point, as
// tf.data's AUTOTUNE does: while the step waits for data (data wait above
// `data_wait_threshold` of the step), the loader is the limit, so it tries
// one more loader thread, then a deeper prefetch; when the step does not
// wait, compute is the limit, so it tries one more and one fewer compute
// thread and one fewer loader thread (a loader thread freed is a core for
// compute). A candidate is measured against the best so far window by
// window in turns (best, candidate, best, candidate, ...), so a drift of
// the machine's speed (a neighbour on a shared host, clocks) moves both
// alike, and it is accepted only when the mean of the paired differences
// beats the noise: more than 2 standard errors of those differences, and
// at least `min_gain` of the best. It stops when no move is accepted, or
// at the budget; the `challengers` (the config's own settings) then face
// the best the same way.
//
// Batch size (SearchBatch). The peak memory of a step is modelled as
// fixed + per_sample * b (parameters, gradients and optimizer state do not
// grow with the batch; activations and batch buffers do), fitted from
// probes at two sizes. The proposal is the largest allowed b whose
// predicted peak is under (1 - margin) of the limit; a real trial confirms
// it. A trial over the target or out of memory refits through the two
// nearest measurements (the model may be convex) and tries again below;
// an out-of-memory trial is recorded and bounds the search from above.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace topspin {

// One setting of every knob.
struct TuneKnobs {
  int64_t loader_threads = 1;
  int64_t prefetch = 1;
  int64_t compute_threads = 1;
  bool pinned = false;       // CUDA only
  int64_t micro_batch = 1;   // pipeline.batch_size
  int64_t grad_accum = 1;    // optim.grad_accum
  bool operator==(const TuneKnobs&) const = default;
  // "loader 2, prefetch 4, compute 2, micro-batch 64 x 1"
  std::string Describe() const;
};

// What a trial measured besides throughput: where the step's time went.
struct TrialSignals {
  double data_wait_fraction = 0;  // of the step's wall time, blocked on the loader
  double loader_busy = 0;         // loader busy seconds per wall second (cores in use)
};

struct TrialOutcome {
  std::vector<double> windows;  // items per second, one per measurement window
  TrialSignals signals;
  uint64_t peak_bytes = 0;      // peak memory of the step (tracked), 0: not measured
  bool oom = false;             // ran out of memory (the limit, or the device)
  std::string error;            // the out-of-memory message
  double seconds = 0;           // wall time the trial took, warm-up included
  double Mean() const;
  // Standard error of the mean over the windows (0 with fewer than 2).
  double StdErr() const;
};

// Runs the real step (or a simulation) at a setting.
class TrialRunner {
 public:
  virtual ~TrialRunner() = default;
  // `windows` more measurement windows at `knobs`: a runner warms up (and
  // discards) when the setting changed since its last call, and continues
  // the same trial when it did not.
  virtual TrialOutcome Run(const TuneKnobs& knobs, int windows) = 0;
};

// Where the search may go.
struct TuneSpace {
  int64_t max_loader_threads = 2;
  int64_t max_prefetch = 16;      // prefetch climbs 1, 2, 4, ... up to this
  int64_t max_compute_threads = 2;
  bool tune_compute_threads = true;
  bool tune_pinned = false;       // CUDA: pinned on and off are both tried
};

struct TuneOptions {
  double budget_s = 60;         // wall seconds for all throughput trials
  int min_windows = 3;
  int max_windows = 8;
  double target_rse = 0.02;     // standard error / mean
  double min_gain = 0.02;       // smallest accepted improvement, of the best
  double data_wait_threshold = 0.05;
};

// One trial of the search, as the JSONL log records it.
struct TrialRecord {
  std::string search;   // "throughput", "batch", "lightning"
  std::string purpose;  // "start", "loader +1 (data wait 31%)", ...
  TuneKnobs knobs;
  TrialOutcome outcome;
  // The best so far (`against`), measured in turns with this trial's windows.
  std::vector<double> baseline;
  TuneKnobs against;
  bool accepted = false;
};

struct ThroughputResult {
  TuneKnobs start, best;
  double best_mean = 0, best_stderr = 0;
  double start_mean = 0;
  // One line per knob: the value chosen and the measurements behind it.
  std::vector<std::pair<std::string, std::string>> reasons;  // key -> why
  std::vector<TrialRecord> trials;
  int distinct_settings = 0;  // settings measured
  double seconds = 0;
  bool budget_hit = false;
};

// `start`'s micro_batch, grad_accum (and pinned when not tuned) are kept;
// the loader starts at one thread and prefetch 2 whatever `start` says.
ThroughputResult TuneThroughput(TrialRunner& runner, const TuneKnobs& start,
                                const TuneSpace& space, const TuneOptions& options,
                                const std::vector<TuneKnobs>& challengers = {});

// One setting measured until its spread is known: min_windows, then one
// more at a time until the standard error is within target_rse of the mean
// (at most max_windows, and only while `time_left` says so; null: always).
// The search's first setting, and each point of `bench tune`'s grid.
TrialOutcome MeasureUntilKnown(TrialRunner& runner, const TuneKnobs& knobs,
                               const TuneOptions& options,
                               const std::function<bool()>& time_left = {});

// True when `candidate` beats `best` by more than the noise (see above):
// windows paired by index, measured in turns.
bool BeatsNoise(const std::vector<double>& best, const std::vector<double>& candidate,
                double min_gain);

// ---- batch size ---------------------------------------------------------------

// Peak bytes = fixed + per_sample * batch.
struct MemoryModel {
  double fixed = 0, per_sample = 0;
  // Through two measurements (a != b).
  static MemoryModel Through(int64_t batch_a, double bytes_a, int64_t batch_b, double bytes_b);
  double Predict(int64_t batch) const { return fixed + per_sample * double(batch); }
  // The largest batch with Predict(batch) <= bytes (per_sample <= 0: none bounds it).
  std::optional<int64_t> LargestUnder(double bytes) const;
};

struct MemoryProbe {
  int64_t batch = 0;
  uint64_t peak_bytes = 0;
  bool oom = false;
  std::string error;
};

struct BatchSearchOptions {
  uint64_t limit_bytes = 0;   // what a step may use in all (host or device)
  double margin = 0.10;       // the chosen batch's predicted and measured peak
                              // stay under (1 - margin) * limit_bytes
  // The batches allowed, ascending (multiples of the world size; with a
  // fixed global batch, its divisors). The search picks among these.
  std::vector<int64_t> allowed;
  int64_t first_probe = 0;    // 0: the smallest allowed >= 1/16 of the largest
  int max_trials = 12;
};

struct BatchSearchResult {
  int64_t batch = 0;          // 0: not even the smallest fits
  uint64_t peak_bytes = 0;    // measured at batch
  MemoryModel model;
  std::vector<MemoryProbe> probes;  // in the order run
  std::string why;
};

BatchSearchResult SearchBatch(const std::function<MemoryProbe(int64_t)>& probe,
                              const BatchSearchOptions& options);

// Lightning's batch-size finder ("binsearch" mode) against the same probe:
// start at `start`, double until a trial runs out of memory (or `max`),
// then halve the gap between the last that fit and the first that did not
// until they are adjacent. Out of memory here is the probe's oom, or a
// peak over `limit_bytes` (Lightning has no margin).
struct LightningResult {
  int64_t batch = 0;
  int trials = 0;
  std::vector<MemoryProbe> probes;
};
LightningResult LightningBatchFinder(const std::function<MemoryProbe(int64_t)>& probe,
                                     int64_t start, int64_t max, uint64_t limit_bytes);

// ---- cache --------------------------------------------------------------------

// What identifies this machine for the tuning cache: CPU model, cores,
// memory, and `accelerator` (the GPUs and the LibTorch build, from the
// caller). 16 hex digits, and the text it digests.
struct MachineFingerprint {
  std::string hash;
  std::string text;
};
MachineFingerprint FingerprintMachine(const std::string& accelerator);

}  // namespace topspin
