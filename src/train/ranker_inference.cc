// Evaluation and scoring of ranker checkpoints (`topspin eval`, `topspin
// score`), outside training.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/pipeline/pipeline_config.h"
#include "topspin/train/ranker_trainer.h"
#include "train/torch_device.h"
#include "train/batch_copier.h"
#include "train/checkpoint_io.h"
#include "train/ranker_parts.h"

namespace topspin {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::unique_ptr<Pipeline> EvalPipeline(const Settings& settings, const std::string& dataset_key,
                                       std::shared_ptr<const Manifest> statistics) {
  PipelineOptions o = PipelineOptionsFrom(settings);
  o.shuffle = ShuffleMode::kNone;
  o.drop_last = false;
  o.max_epochs = 1;
  return std::make_unique<Pipeline>(
      RankingSpecFrom(settings, dataset_key, std::move(statistics)), o);
}

RankMetricAccumulator ScoreLists(Ranker& ranker, Pipeline& pipeline, const Precision& precision,
                                 int64_t max_batches, const ComputeDevice& device) {
  torch::NoGradGuard no_grad;
  RankMetricAccumulator acc;
  int64_t n = 0;
  const torch::Device to = TorchDevice(device);
  while (BatchPtr b = pipeline.Next()) {
    const BatchTensors t = WrapHost(*b);
    const auto scores =
        precision
            .Run([&] { return ranker.Forward(t.dense.to(to), t.sparse.to(to), /*train=*/false); })
            .scores.to(torch::kCPU, torch::kFloat)
            .contiguous();
    acc.AddBatch({scores.data_ptr<float>(), b->num_docs}, b->labels(), b->offsets());
    if (max_batches > 0 && ++n >= max_batches) break;
  }
  return acc;
}

std::map<std::string, double> MetricsOf(const RankMetricAccumulator& acc) {
  return {{"ndcg@1", acc.ndcg(1)},   {"ndcg@3", acc.ndcg(3)}, {"ndcg@5", acc.ndcg(5)},
          {"ndcg@10", acc.ndcg(10)}, {"map@10", acc.map()},   {"mrr", acc.mrr()}};
}

namespace {

// A checkpoint's model, ready to score data transformed as its training
// data was (the statistics saved with it).
struct InferenceModel {
  Checkpoint checkpoint;
  std::shared_ptr<const Manifest> statistics;
  ComputeDevice device;
  std::unique_ptr<Ranker> ranker;
};

// `pipeline_for` builds the pipeline from the checkpoint's statistics (the
// model's feature layout comes from it).
InferenceModel LoadInferenceModel(
    const Settings& settings, const fs::path& checkpoint, CheckpointChoice choice,
    const std::function<const Pipeline&(std::shared_ptr<const Manifest>)>& pipeline_for) {
  InferenceModel m;
  m.checkpoint = OpenCheckpoint(checkpoint, choice);
  const Checkpoint& ckpt = m.checkpoint;
  if (!ckpt.files.contains(kStatisticsFile)) {
    throw DataError(fmt::format("checkpoint {} has no {}: it predates evaluation outside "
                                "training",
                                ckpt.dir.string(), kStatisticsFile),
                    ErrorWhere{.file = ckpt.dir.string()},
                    "train again (or resume once) with this topspin to write one");
  }
  m.statistics = std::make_shared<const Manifest>(Manifest::FromJson(
      ReadFile(ckpt.FilePath(kStatisticsFile)), ckpt.FilePath(kStatisticsFile).string()));
  const Pipeline& pipeline = pipeline_for(m.statistics);
  m.device = ResolveDevice(settings.train.device, VisibleGpus(), 0);
  UseDevice(m.device);
  m.ranker = std::make_unique<Ranker>(ModelOptions(settings, pipeline));
  m.ranker->To(TorchDevice(m.device));
  const SafetensorsFile file = SafetensorsFile::Open(ckpt.FilePath(kModelFile));
  LoadModuleParameters(file, m.ranker->dense_module());
  torch::NoGradGuard no_grad;
  for (size_t c = 0; c < m.ranker->tables().size(); ++c) {
    CopyFromCheckpoint(file, fmt::format("table{}", c), m.ranker->tables()[c]);
  }
  return m;
}

}  // namespace

RankerEvalResult EvaluateRanker(const Config& config, const fs::path& checkpoint,
                                const std::string& dataset_key, CheckpointChoice choice) {
  const auto started = Clock::now();
  const Settings settings = Settings::From(config);
  std::unique_ptr<Pipeline> pipeline;
  InferenceModel m = LoadInferenceModel(
      settings, checkpoint, choice,
      [&](std::shared_ptr<const Manifest> statistics) -> const Pipeline& {
        pipeline = EvalPipeline(settings, dataset_key, std::move(statistics));
        return *pipeline;
      });
  const RankMetricAccumulator acc =
      ScoreLists(*m.ranker, *pipeline, Precision(settings.train, m.device), 0, m.device);
  RankerEvalResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = static_cast<int64_t>(m.checkpoint.step);
  r.lists = acc.lists();
  r.metrics = MetricsOf(acc);
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

RankerScoreResult ScoreRanker(const Config& config, const fs::path& checkpoint,
                              const fs::path& dataset,
                              const std::function<void(const ScoredBatch&)>& sink,
                              CheckpointChoice choice) {
  const auto started = Clock::now();
  const Settings settings = Settings::From(config);
  std::unique_ptr<Pipeline> pipeline;
  InferenceModel m = LoadInferenceModel(
      settings, checkpoint, choice,
      [&](std::shared_ptr<const Manifest> statistics) -> const Pipeline& {
        PipelineOptions o = PipelineOptionsFrom(settings);
        o.shuffle = ShuffleMode::kNone;  // dataset order
        o.drop_last = false;
        o.max_epochs = 1;
        o.on_error = OnError::kFail;  // a skipped row group would shift every later row
        RankingSpec spec = RankingSpecFrom(settings, "data.train", std::move(statistics));
        spec.dataset = dataset;
        spec.allow_unlabeled = true;
        pipeline = std::make_unique<Pipeline>(spec, o);
        return *pipeline;
      });
  RankerScoreResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = static_cast<int64_t>(m.checkpoint.step);
  const Manifest data = Manifest::Load(dataset);
  r.labeled = std::any_of(data.schema.begin(), data.schema.end(), [&](const ColumnSpec& c) {
    return c.name == m.statistics->label_column;
  });
  const Precision precision(settings.train, m.device);
  const torch::Device to = TorchDevice(m.device);
  torch::NoGradGuard no_grad;
  while (BatchPtr b = pipeline->Next()) {
    const BatchTensors t = WrapHost(*b);
    const auto scores =
        precision
            .Run([&] { return m.ranker->Forward(t.dense.to(to), t.sparse.to(to), /*train=*/false); })
            .scores.to(torch::kCPU, torch::kFloat)
            .contiguous();
    sink({.scores = {scores.data_ptr<float>(), b->num_docs},
          .labels = b->labels(),
          .offsets = b->offsets(),
          .labeled = r.labeled});
    r.lists += b->num_lists;
    r.docs += b->num_docs;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

}  // namespace topspin
