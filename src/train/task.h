// A workload the trainer core trains (docs/ARCHITECTURE.md "The trainer
// core"): the ranker (ranker_task.cc), the GPT (gpt_task.cc).
//
// The core owns everything that does not depend on the model: the step
// loop and its phases, gradient accumulation, the dense state (flat
// buffers, optimizer, buckets, ZeRO-0..3, clipping), precision, log
// windows, evaluation schedule, best checkpoint and early stopping,
// checkpoints and resume, signals and the run's outputs. A Task owns its
// model and its data: it builds them from the config, runs forward and
// loss on the next micro-batch, evaluates, and names the state beyond the
// dense parameters that a checkpoint must hold.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "topspin/core/config.h"
#include "topspin/core/config_schema.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/model/gpt.h"
#include "topspin/plan/memory_plan.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/train/device.h"
#include "train/phases.h"
#include "train/precision.h"

namespace torch::nn {
class Module;
}

namespace topspin {

class Comm;
class SparseState;
class Zero3;

// What a Task is built with.
struct TaskContext {
  const Settings& settings;
  ComputeDevice device;
  Comm* comm = nullptr;             // several ranks only
  int rank = 0, world_size = 1;
  PipelineState start;              // where the training data resumes
  TraceRecorder* trace = nullptr;   // loader spans
};

// One micro-batch's loss: `sum` over `count` terms (backward runs on the
// sum; the core divides the gradients by the global count once every
// rank's are summed, so the run does not depend on how the batch was
// split), and the items (documents, tokens) it trained on.
struct LossTerms {
  at::Tensor sum;
  int64_t count = 0;
  int64_t items = 0;
};

struct Evaluation {
  std::map<std::string, double> metrics;  // "ndcg@10", "loss", ...: logged as valid/<name>
  std::string summary;                    // for the log line
};

class Task {
 public:
  virtual ~Task() = default;

  // What items counts: "docs", "tokens" (throughput is <unit>_per_s).
  virtual const char* unit() const = 0;
  // The module whose parameters are the dense state (DenseState).
  virtual torch::nn::Module& dense_module() = 0;
  // dist.zero 3: the dense parameters in units gathered one at a time
  // (empty: the model cannot be sharded that way), and the brackets around
  // each unit's use in forward.
  virtual std::vector<std::vector<at::Tensor>> Units() { return {}; }
  virtual void BracketUnits(Zero3& /*zero*/) {}
  // Embedding rows updated sparsely (null: every parameter is dense).
  virtual SparseState* sparse() { return nullptr; }

  // The next micro-batch of this rank onto the compute device: the wait
  // for the loader is phase data_wait (on CUDA the copy's exposed part h2d).
  virtual void NextBatch(Phases& phases) = 0;
  // Forward and loss of that micro-batch (model under `precision`, the loss
  // in fp32). A sparse Task hands its rows to sparse() here.
  virtual LossTerms Forward(const Precision& precision) = 0;
  // After that micro-batch's backward: drop it (its buffer returns to the
  // loader's pool, its activations are freed).
  virtual void EndMicroBatch() {}
  // Where the training data resumes: after the last batch trained on.
  virtual PipelineState LoaderState() const = 0;
  // The training loader's stages with their busy seconds, and its threads.
  virtual std::vector<StageStats> LoaderStages() const = 0;
  // The training loader itself (the AutoTuner changes its parallelism).
  virtual Pipeline& training_pipeline() = 0;

  // Scores data.valid: the metrics TaskMetricNames() names.
  virtual Evaluation Evaluate(const Precision& precision) = 0;
  virtual bool has_validation() const = 0;

  // Training FLOPs per item (3x forward), for MFU.
  virtual double TrainFlopsPerItem() const = 0;
  // Files a checkpoint holds besides the tensors (the ranker's feature
  // statistics, which eval needs without the training data).
  virtual void AddCheckpointFiles(CheckpointWriter& /*writer*/) const {}
};

// The Task of `model.kind` (ranker, gpt).
std::unique_ptr<Task> MakeTask(const TaskContext& context);
std::unique_ptr<Task> MakeRankerTask(const TaskContext& context);
std::unique_ptr<Task> MakeGptTask(const TaskContext& context);

// The validation metrics of a model.kind, the default train.best.metric
// (auto) first: ndcg@10, ... (ranker); loss, perplexity (gpt).
std::vector<std::string> TaskMetricNames(const std::string& kind);

// Refuses a key set in the file or by --set that the run's model.kind does
// not read (model.loss for a GPT, model.gpt.layers for the ranker): a
// setting that silently does nothing is a wrong experiment.
void CheckKeysApply(const Config& config);

// What training checks before it allocates anything, without training
// (`topspin config check`; CheckTrainConfig adds the kind-independent
// rules). Throws the error training would; returns one line per check
// passed. The ranker: the training data (labels for the loss, every
// feature chain against its statistics), the validation data's schema,
// and whether the model fits in this host's memory. The GPT: its size,
// and its data's windows and vocabulary.
std::vector<std::string> CheckRankerConfig(const Settings& settings);
std::vector<std::string> CheckGptConfig(const Settings& settings);
// GptShapeFromConfig: topspin/plan/memory_plan.h.
// model.gpt.attention and model.gpt.fused_ops.
GptKernels GptKernelsFromConfig(const GptModelConfig& gpt);

}  // namespace topspin
