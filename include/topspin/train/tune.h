// `topspin tune`: the AutoTuner on the real training step of a config
// (any model.kind), with the search of topspin/perf/tuner.h.
//
// Trials run the trainer core's own step (forward, backward, optimizer,
// the training pipeline) in this process, without evaluation,
// checkpoints or outputs. Loader threads, prefetch and compute threads
// change between trials while the pipeline runs (Pipeline::SetParallelism,
// at::set_num_threads); a micro-batch or pinned-memory change builds the
// trainer anew. Several ranks (world_size > 1): the trials run one rank's
// share of the batch on this host's cores divided by the ranks.
//
// Memory. On the CPU every tensor allocation goes through a counting
// allocator while trials run, so a step's peak is exact (parameters,
// gradients, optimizer state, activations, batch tensors) and an
// allocation past the limit throws c10::OutOfMemoryError like a device
// would: the trial is recorded as out of memory, the trainer destroyed and
// the process goes on. On CUDA the caching allocator's peak and its own
// out-of-memory error are used.
//
// Cache. A result is kept under cache_dir, keyed by the machine's
// fingerprint (CPU, cores, memory, GPUs, LibTorch) and the workload's hash
// (the config without the tuned keys and the keys that do not change a
// step: run.*, train.steps, logging, evaluation and checkpoint cadence), so
// tuning the same workload on the same machine again is instant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "topspin/core/config.h"
#include "topspin/perf/tuner.h"

namespace topspin {

struct TuneRequest {
  std::filesystem::path config;        // the YAML file
  std::vector<std::string> overrides;  // --set
  int world_size = 1;                  // ranks the tuned config will train with
  double budget_s = 120;               // the throughput search's wall time
  // What a step may use: a fraction (0, 1] of the memory this process can
  // use (host: available memory; CUDA: the device's), or bytes ("2GiB").
  std::string memory_limit = "0.8";
  double margin = 0.10;
  bool tune_batch = true;
  // false: keep the global batch (pipeline.batch_size x optim.grad_accum)
  // and choose only its micro-batch/accumulation split; true: the
  // micro-batch may change the global batch, which changes training.
  bool free_batch = false;
  double window_s = 0.5;  // a measurement window's length, roughly
  std::filesystem::path cache_dir;  // "": DefaultTuneCacheDir()
  bool use_cache = true;
  bool cache_only = false;  // no trials: a cache miss is an error (the ranks of a job)
  std::filesystem::path log;        // JSONL, one line per trial ("": none)
  std::function<void(const std::string&)> say;  // progress lines (null: none)
};

struct TuneReport {
  bool cache_hit = false;
  std::filesystem::path cache_file;
  MachineFingerprint machine;
  std::string workload;               // the workload hash
  std::string unit;                   // docs, tokens
  std::vector<std::string> sets;      // "key=value", to train with
  std::string yaml;                   // the tuned config, a comment per choice
  double defaults_rate = 0;           // items/s at the config's own settings
  double tuned_rate = 0;
  int trials = 0;
  double seconds = 0;
  std::vector<std::string> summary;   // lines for the terminal
};

// $TOPSPIN_TUNE_CACHE, else $XDG_CACHE_HOME/topspin/tune, else
// ~/.cache/topspin/tune.
std::filesystem::path DefaultTuneCacheDir();

// The bytes a --memory-limit names: "0.8" of `available`, or "2GiB",
// "512MiB", "3000000000". Throws Error{kConfig} naming --memory-limit.
uint64_t ParseMemoryLimit(const std::string& text, uint64_t available);

// The workload's hash: what the cache is keyed by besides the machine.
std::string WorkloadHash(const Config& config);

TuneReport Tune(const TuneRequest& request);

// The real step as a TrialRunner and a batch probe (`topspin bench tune`
// runs its grid and Lightning's finder through it).
class StepTrials final : public TrialRunner {
 public:
  explicit StepTrials(const TuneRequest& request);
  ~StepTrials() override;
  TrialOutcome Run(const TuneKnobs& knobs, int windows) override;
  // One step's peak memory at per-rank micro-batch `batch` (the other
  // knobs at `base`).
  MemoryProbe Probe(int64_t batch, const TuneKnobs& base);

  const TuneKnobs& defaults() const;  // the config's own settings (per rank)
  TuneSpace space() const;
  // The per-rank micro-batches allowed (see TuneRequest::free_batch), and
  // the accumulation each needs to keep the global batch.
  std::vector<int64_t> AllowedBatches() const;
  int64_t AccumFor(int64_t batch) const;
  uint64_t limit_bytes() const;
  const std::string& unit() const;
  const Config& config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
