// Training the search ranker from a declarative config (`topspin train`).
//
// One optimizer step: optim.grad_accum batches from the input pipeline
// (data.train, the config's features), the ranker's scores, the ranking
// loss (model.loss), backward into the flat gradient buffer and the
// gathered embedding rows, a finiteness check (a non-finite loss or
// gradient skips the step and counts it; train.max_bad_steps in a row stop
// the run with Error{kData}), the global gradient-norm clip
// (optim.clip_norm), AdamW/SGD over the flat buffer and row-wise sparse
// updates of the touched embedding rows (optim.sparse, optim.sparse_lr,
// following the same schedule shape as optim.lr).
//
// Outputs in the run directory: metrics.jsonl and tb/ (TensorBoard), one
// record every train.log_every steps (loss, lr, docs/s) and at each
// evaluation (NDCG@1/3/5/10, MAP@10, MRR on data.valid); checkpoints/
// (step-N/: safetensors of parameters, optimizer state and embedding
// tables, plus a manifest with the step, the config hash and the pipeline
// state) every train.checkpoint_every steps and at the end.
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
#include <map>
#include <string>

#include "topspin/core/config.h"

namespace topspin {

struct RankerTrainOptions {
  std::filesystem::path run_dir;
  std::string resume;  // "": fresh; "auto": newest checkpoint in run_dir; else a checkpoint dir
  // Tests: leave the loop after this many steps of this process, as if the
  // process died (no final checkpoint, no final evaluation). 0: off.
  int64_t stop_after_steps = 0;
};

struct RankerTrainResult {
  int64_t step = 0;                  // steps completed (the next step to run)
  int64_t resumed_from = -1;         // checkpoint step, or -1
  double last_loss = NAN;            // mean loss of the last logged window
  double valid_ndcg10 = NAN;         // last evaluation (NaN without data.valid)
  double docs_per_s = 0;             // training documents per second in this process
  int64_t skipped_steps = 0;         // non-finite steps skipped
  std::filesystem::path checkpoint;  // the last checkpoint written
  // Wall seconds of this process by phase: data_wait (blocked on the input
  // pipeline), forward, backward, optimizer (finiteness check, clipping,
  // dense and sparse updates), eval, checkpoint.
  std::map<std::string, double> phase_s;
};

RankerTrainResult TrainRanker(const Config& config, const RankerTrainOptions& options);

// "data wait 2.1% (0.21 s), forward 31.0% (3.10 s), ..." in phase order.
std::string DescribePhases(const RankerTrainResult& result);

}  // namespace topspin
