#include <cfloat>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"
#include "topspin/data/dataset.h"
#include "topspin/perf/memory.h"
#include "topspin/pipeline/pipeline_config.h"
#include "train/task.h"
#include "train/ranker_parts.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// "shard-00002.tshard row 1234 (dataset row 71234) holds 50": the first
// label outside [lo, hi] (or not finite), for the error that refuses it.
// Reads only the label column, and only on that error path.
std::string FirstBadLabel(const std::string& dir, const std::string& column, double lo, double hi) {
  const DatasetReader reader{fs::path(dir)};
  uint64_t before = 0;
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    const size_t c = shard.ColumnIndex(column);
    uint64_t in_shard = 0;
    for (size_t g = 0; g < shard.num_row_groups(); ++g) {
      const Column labels = shard.ReadChunk(g, c);
      for (size_t r = 0; r < labels.size(); ++r) {
        const double y = labels.AsDouble(r);
        if (labels.IsValid(r) && !(y >= lo && y <= hi)) {
          return fmt::format("{} row {} (dataset row {}) holds {}",
                             reader.manifest().shards[s].file, in_shard + r, before + r, y);
        }
      }
      in_shard += labels.size();
      before += labels.size();
    }
  }
  return "no row found";
}

}  // namespace

RankerOptions ModelOptions(const Settings& settings, const Pipeline& p) {
  const RankerModelConfig& m = settings.model.ranker;
  RankerOptions o;
  o.dense_dim = static_cast<int64_t>(p.layout().dense_dim);
  for (uint64_t c : p.sparse_cardinalities()) o.table_sizes.push_back(static_cast<int64_t>(c));
  o.embedding_dim = m.embedding_dim;
  o.bottom = m.bottom;
  o.top = m.top;
  o.interaction = ParseInteraction(m.interaction);
  o.cross_layers = static_cast<int>(m.cross_layers);
  o.seed = static_cast<uint64_t>(settings.run.seed);
  return o;
}

void CheckModelFitsInMemory(const Settings& settings, const RankerOptions& o,
                            const std::vector<std::string>& sparse_names, uint64_t available) {
  if (available == 0) return;  // unknown: the allocator decides
  const double dense_per_param = 4 + 4 + (settings.optim.name == "adamw" ? 8 : 4);
  const bool lazy_adam = settings.optim.sparse == "lazy_adam";
  const double dense = double(RankerDenseParameters(o)) * dense_per_param;
  double total = dense, largest = 0;
  size_t largest_table = 0;
  for (size_t c = 0; c < o.table_sizes.size(); ++c) {
    // Rows, plus two moments (lazy Adam) or one accumulator per row (Adagrad).
    const double rows = double(o.table_sizes[c]);
    const double bytes =
        rows * 4 * double(o.embedding_dim) * (lazy_adam ? 3 : 1) + (lazy_adam ? 0 : rows * 4);
    total += bytes;
    if (bytes > largest) largest = bytes, largest_table = c;
  }
  if (total <= 0.9 * double(available)) return;
  const bool table = largest > dense;
  const auto weights = [](int64_t in, const std::vector<int64_t>& widths) {
    double n = 0;
    for (int64_t w : widths) n += double(in) * double(std::exchange(in, w));
    return n;
  };
  const int64_t bottom_out = o.bottom.empty() ? o.dense_dim : o.bottom.back();
  const int64_t width = bottom_out + int64_t(o.table_sizes.size()) * o.embedding_dim;
  const char* layers =
      weights(o.dense_dim, o.bottom) > weights(width, o.top) ? "model.bottom" : "model.top";
  const std::string what =
      table ? fmt::format("the embedding table of \"{}\" ({} rows x {} = {})",
                          largest_table < sparse_names.size() ? sparse_names[largest_table] : "?",
                          o.table_sizes[largest_table], o.embedding_dim,
                          FormatBytes(uint64_t(largest)))
            : fmt::format("the dense layers ({} parameters with gradients and optimizer state = {})",
                          RankerDenseParameters(o), FormatBytes(uint64_t(dense)));
  throw ConfigError(
      fmt::format("the model needs ~{} to train, more than the {} this host has available; the "
                  "largest part is {}",
                  FormatBytes(uint64_t(total)), FormatBytes(available), what),
      ErrorWhere{.field = table ? "pipeline.sparse" : layers},
      table ? "hash that feature into fewer slots (hash(N) in its chain), or lower "
              "model.embedding_dim"
            : "use narrower layers (model.top, model.bottom)");
}

void CheckLabels(const Manifest& data, const std::string& dir, RankLoss loss) {
  const auto it = data.stats.find(data.label_column);
  if (it == data.stats.end()) return;  // no label column: the pipeline says so
  const ColumnStats& s = it->second;
  const ErrorWhere where{.file = dir, .field = data.label_column};
  const std::string column = fmt::format("label column \"{}\"", data.label_column);
  if (s.infinite > 0) {
    throw DataError(fmt::format("the {} holds {} infinite value{}; the first: {}", column,
                                s.infinite, s.infinite == 1 ? "" : "s",
                                FirstBadLabel(dir, data.label_column, -DBL_MAX, DBL_MAX)),
                    where, "fix the labels and convert the data again");
  }
  if (s.quantiles.empty()) return;  // every label null: imputed 0
  double lo = -INFINITY, hi = INFINITY;
  const char* why = "";
  if (loss == RankLoss::kBce) {
    lo = 0, hi = RankLossOptions{}.label_max, why = "bce's targets are label / 4, in [0, 1]";
  } else if (loss == RankLoss::kLambdaRank || loss == RankLoss::kSoftmax ||
             loss == RankLoss::kApproxNdcg) {
    lo = 0, hi = 31, why = "its gains are 2^label - 1 of graded relevance";
  } else if (loss == RankLoss::kMse) {
    lo = -1e18, hi = 1e18, why = "squared errors of larger labels overflow";
  }
  if (s.min >= lo && s.max <= hi) return;
  throw DataError(
      fmt::format("the {} ranges from {} to {} (manifest statistics), but model.loss {} needs "
                  "labels in [{}, {}]: {}; the first outside: {}",
                  column, s.min, s.max, RankLossName(loss), lo, hi, why,
                  FirstBadLabel(dir, data.label_column, lo, hi)),
      where,
      "map the labels into that range when converting, or choose model.loss ranknet (any "
      "finite label) or mse");
}

std::vector<std::string> CheckRankerConfig(const Settings& settings) {
  std::vector<std::string> out;
  const RankLoss loss = ParseRankLoss(settings.model.ranker.loss);
  const std::string& train_dir = settings.data.train;
  if (train_dir.empty()) {
    out.push_back("data.train is not set: the data, features and model size were not checked");
    return out;
  }
  auto statistics = std::make_shared<const Manifest>(Manifest::Load(train_dir));
  CheckLabels(*statistics, train_dir, loss);
  // The pipelines resolve every feature chain against the training data's
  // statistics and compare the validation data's schema with it.
  const Pipeline train(RankingSpecFrom(settings, "data.train"), PipelineOptionsFrom(settings));
  out.push_back(fmt::format("data.train: {} rows, {} lists; {} dense and {} sparse features",
                            statistics->rows(), statistics->group_stats.groups,
                            train.layout().dense_dim, train.sparse_names().size()));
  if (const std::string& valid = settings.data.valid; !valid.empty()) {
    EvalPipeline(settings, "data.valid", statistics);
    out.push_back(fmt::format("data.valid: {} (same schema)", valid));
  }
  const RankerOptions model = ModelOptions(settings, train);
  int64_t rows = 0;
  for (int64_t t : model.table_sizes) rows += t;
  const uint64_t available = AvailableMemoryBytes();
  CheckModelFitsInMemory(settings, model, train.sparse_names(), available);
  out.push_back(fmt::format("model: {} dense parameters, {} embedding rows of {}; fits in the {} "
                            "this host has available",
                            RankerDenseParameters(model), rows, model.embedding_dim,
                            FormatBytes(available)));
  return out;
}

}  // namespace topspin
