// The config's `pipeline` and `data` sections as pipeline options and specs.
#pragma once

#include <memory>
#include <string>

#include "topspin/core/config_schema.h"
#include "topspin/pipeline/pipeline.h"

namespace topspin {

// threads, prefetch, batch_size, shuffle, window_blocks, drop_last,
// on_error, cache_mib from `pipeline`, the seed from run.seed.
PipelineOptions PipelineOptionsFrom(const Settings& settings, int rank = 0, int world_size = 1);
// pipeline.dense and pipeline.sparse over the dataset at `dataset_key`
// ("data.train" or "data.valid"); Error{kConfig} naming the key when it is
// empty. `statistics`: the manifest whose statistics fix the transform
// constants (the training data's, for validation and evaluation); null: the
// dataset's own.
RankingSpec RankingSpecFrom(const Settings& settings, const std::string& dataset_key,
                            std::shared_ptr<const Manifest> statistics = nullptr);

}  // namespace topspin
