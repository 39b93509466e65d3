// What `topspin train` does once its arguments are parsed (cmd_train.cc):
// the job layer's role for this process (topspin/dist/job.h: launcher,
// rank or single process), the run directory, the process policy, the
// trainer core (topspin/train/trainer.h) and what rank 0 prints at the end.
#pragma once

#include <string>
#include <vector>

#include "cli/tune_args.h"
#include "topspin/dist/job.h"

namespace topspin::cli {

struct TrainArgs {
  std::string path;
  std::vector<std::string> overrides;
  JobArgs job;
  bool extend = false;
  std::string init_from;
  // --tune: the AutoTuner first (or its cache), then training with its
  // settings. A rank of a job reads the cache its launcher wrote.
  bool tune = false;
  TuneArgs tune_args;
};

// Throws ExitRequest with the status a launcher or a stopped run exits with.
void RunTrainJob(const TrainArgs& args);

}  // namespace topspin::cli
