// The ranker's pieces shared by its Task (ranker_task.cc), its checks
// (ranker_checks.cc) and evaluation and scoring (ranker_inference.cc).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "topspin/core/config_schema.h"
#include "topspin/data/manifest.h"
#include "topspin/model/rank_losses.h"
#include "topspin/model/rank_metrics.h"
#include "topspin/model/ranker.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/train/device.h"
#include "train/precision.h"

namespace topspin {

// The training data's statistics in every checkpoint: `topspin eval`
// transforms any dataset exactly as training did, without the training data.
inline constexpr const char* kStatisticsFile = "statistics.json";

// The model section and the pipeline's feature layout as RankerOptions.
RankerOptions ModelOptions(const Settings& settings, const Pipeline& pipeline);

// Refuses, before anything is allocated, a model whose training state
// cannot fit in this host's memory (`available` bytes; 0: unknown):
// parameters, gradients and optimizer state of the dense layers and of
// every embedding table. The key named is the one that asks for the most.
void CheckModelFitsInMemory(const Settings& settings, const RankerOptions& o,
                            const std::vector<std::string>& sparse_names, uint64_t available);

// Refuses labels the loss cannot learn from, by the training data's label
// statistics (`dir`: the dataset, for the first offending row).
void CheckLabels(const Manifest& data, const std::string& dir, RankLoss loss);

// The evaluation pipeline over `dataset_key`: every list once, in order,
// transformed with the training data's `statistics`.
std::unique_ptr<Pipeline> EvalPipeline(const Settings& settings, const std::string& dataset_key,
                                       std::shared_ptr<const Manifest> statistics);

// Scores up to `max_batches` batches (0: all) on `device` and accumulates
// the metrics (on the host, from the host batch's labels and offsets).
RankMetricAccumulator ScoreLists(Ranker& ranker, Pipeline& pipeline, const Precision& precision,
                                 int64_t max_batches, const ComputeDevice& device);

// ndcg@1, ndcg@3, ndcg@5, ndcg@10, map@10, mrr.
std::map<std::string, double> MetricsOf(const RankMetricAccumulator& acc);

}  // namespace topspin
