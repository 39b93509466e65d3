#include "topspin/pipeline/pipeline_config.h"

#include <fmt/format.h>

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"

namespace topspin {

PipelineOptions PipelineOptionsFrom(const Settings& settings, int rank, int world_size) {
  const PipelineConfig& p = settings.pipeline;
  PipelineOptions o;
  o.threads = static_cast<int>(p.threads);
  o.prefetch = static_cast<int>(p.prefetch);
  o.batch_size = static_cast<uint64_t>(p.batch_size);
  o.shuffle = ParseShuffleMode(p.shuffle);
  o.window_blocks = static_cast<uint64_t>(p.window_blocks);
  o.drop_last = p.drop_last;
  o.on_error = p.on_error == "skip" ? OnError::kSkip : OnError::kFail;
  o.cache_bytes = static_cast<size_t>(p.cache_mib) << 20;
  o.seed = static_cast<uint64_t>(settings.run.seed);
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

RankingSpec RankingSpecFrom(const Settings& settings, const std::string& dataset_key,
                            std::shared_ptr<const Manifest> statistics) {
  const PipelineConfig& p = settings.pipeline;
  const std::string& dir = settings.data.Dir(dataset_key);
  if (dir.empty()) {
    throw ConfigError(fmt::format("{} is not set", dataset_key), ErrorWhere{.field = dataset_key},
                      fmt::format("set it in the config or with --set {}=DIR", dataset_key));
  }
  if (p.dense.empty() && p.sparse.empty()) {
    throw ConfigError("no features: pipeline.dense and pipeline.sparse are both empty",
                      ErrorWhere{.field = "pipeline.dense"},
                      "list feature chains such as \"price: log1p | standardize\"");
  }
  return RankingSpec{
      .dataset = dir, .dense = p.dense, .sparse = p.sparse, .statistics = std::move(statistics)};
}

}  // namespace topspin
