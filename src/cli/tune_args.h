// The AutoTuner's command-line options, shared by `topspin tune` and
// `topspin train --tune` (cmd_tune.cc, train_job.cc).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/tune.h"
#endif

namespace topspin::cli {

struct TuneArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string out, log;
  double budget_s = 120;
  std::string memory_limit = "0.8";
  double margin = 0.10;
  bool free_batch = false, no_batch = false, no_cache = false;
  int world_size = 1;
};

// --budget, --memory-limit, --margin, --free-batch, --no-batch, --no-cache.
inline void AddTuneOptions(CLI::App* cmd, TuneArgs& a, const std::string& prefix = "") {
  cmd->add_option("--" + prefix + "budget", a.budget_s,
                  "seconds for the loader/compute search (default 120)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--" + prefix + "memory-limit", a.memory_limit,
                  "what a step may use: a fraction of the memory this process can use (host, "
                  "or the GPU's), or bytes like 2GiB (default 0.8)");
  cmd->add_option("--" + prefix + "margin", a.margin,
                  "the chosen micro-batch's peak stays under (1 - margin) of the limit "
                  "(default 0.1)")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_flag("--" + prefix + "free-batch", a.free_batch,
                "the micro-batch may change the global batch (this changes training: the "
                "tuned config says so); default: keep pipeline.batch_size x optim.grad_accum");
  cmd->add_flag("--" + prefix + "no-batch", a.no_batch, "keep the micro-batch as configured");
  cmd->add_flag("--" + prefix + "no-cache", a.no_cache,
                "tune again even when the cache has this machine and workload");
}

#ifdef TOPSPIN_HAVE_TORCH
inline TuneRequest MakeTuneRequest(const TuneArgs& a) {
  TuneRequest r;
  r.config = a.config;
  r.overrides = a.overrides;
  r.world_size = a.world_size;
  r.budget_s = a.budget_s;
  r.memory_limit = a.memory_limit;
  r.margin = a.margin;
  r.tune_batch = !a.no_batch;
  r.free_batch = a.free_batch;
  r.use_cache = !a.no_cache;
  r.say = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return r;
}
#endif

}  // namespace topspin::cli
