// The search ranker (model.kind: ranker): training through the trainer
// core (topspin/train/trainer.h), evaluation and scoring of its
// checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "topspin/train/trainer.h"

namespace topspin {

using RankerTrainOptions = TrainOptions;
using RankerTrainResult = TrainResult;

// Train() of a model.kind ranker config.
RankerTrainResult TrainRanker(const Config& config, const RankerTrainOptions& options);

struct RankerEvalResult {
  std::filesystem::path checkpoint;       // the step-N directory used
  int64_t step = 0;                       // its training step
  uint64_t lists = 0;                     // queries scored
  std::map<std::string, double> metrics;  // ndcg@1, ndcg@3, ndcg@5, ndcg@10, map@10, mrr
  double seconds = 0;
};

// Scores every list of `dataset_key` ("data.valid", or "data.train") with
// a checkpoint's model: `checkpoint` is a step-N directory, or a run
// directory (its best checkpoint, or its newest: `choice`). Features are
// transformed with the training data's statistics, saved in the checkpoint, so the training
// data need not be present. `config` must describe the same model and
// features as the run that wrote the checkpoint (its config.yaml);
// Error{kData} names the tensor that does not fit otherwise.
RankerEvalResult EvaluateRanker(const Config& config, const std::filesystem::path& checkpoint,
                                const std::string& dataset_key = "data.valid",
                                CheckpointChoice choice = CheckpointChoice::kBest);

// One batch of ScoreRanker: lists in dataset order, each list's documents
// in row order.
struct ScoredBatch {
  std::span<const float> scores;     // [N]
  std::span<const float> labels;     // [N] (0 for unlabeled data)
  std::span<const int64_t> offsets;  // [B + 1]
  bool labeled = true;               // false: the data has no label column
};

struct RankerScoreResult {
  std::filesystem::path checkpoint;  // the step-N directory used
  int64_t step = 0;
  uint64_t lists = 0, docs = 0;
  double seconds = 0;                // loading, transforming and scoring
  bool labeled = true;               // false: the data has no label column
};

// The model's score of every document of `dataset` (any directory with
// the training data's columns; its label column may be absent), in dataset
// order, handed to `sink` one batch at a time while the loader prepares the
// next batches (pipeline.threads, pipeline.batch_size). Checkpoint and
// features as EvaluateRanker.
RankerScoreResult ScoreRanker(const Config& config, const std::filesystem::path& checkpoint,
                              const std::filesystem::path& dataset,
                              const std::function<void(const ScoredBatch&)>& sink,
                              CheckpointChoice choice = CheckpointChoice::kBest);

}  // namespace topspin
