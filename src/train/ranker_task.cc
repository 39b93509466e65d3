// The search ranker as a Task of the trainer core (src/train/task.h): its
// pipeline (data.train through the config's feature chains), its model
// (topspin/model/ranker.h: dense layers into DenseState, embedding tables
// into SparseState), the listwise loss (model.loss), and NDCG, MAP and MRR
// on data.valid.
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/perf/memory.h"
#include "topspin/pipeline/pipeline_config.h"
#include "topspin/train/lr_schedule.h"
#include "topspin/train/sparse_state.h"
#include "train/batch_copier.h"
#include "train/ranker_parts.h"
#include "train/torch_device.h"
#include "train/task.h"

namespace topspin {
namespace {

SparseOptimizer::Options SparseOptionsFrom(const OptimConfig& optim) {
  return {.kind = optim.sparse == "lazy_adam"
                      ? SparseOptimizer::Kind::kLazyAdam
                      : SparseOptimizer::Kind::kRowWiseAdagrad,
          .beta1 = optim.beta1,
          .beta2 = optim.beta2};
}

class RankerTask final : public Task {
 public:
  explicit RankerTask(const TaskContext& c)
      : settings_(c.settings),
        device_(c.device),
        loss_(ParseRankLoss(c.settings.model.ranker.loss)),
        copier_(c.device) {
    const Settings& settings = c.settings;
    PipelineOptions popt = PipelineOptionsFrom(settings, c.rank, c.world_size);
    popt.trace = c.trace;
    // Page-locked batch buffers: the host-to-device copies run async.
    if (device_.cuda && settings.pipeline.pinned_memory) popt.allocator = PinnedAllocator();
    train_ = std::make_unique<Pipeline>(RankingSpecFrom(settings, "data.train"), popt, c.start);
    statistics_ = std::make_shared<const Manifest>(Manifest::Load(settings.data.train));
    CheckLabels(*statistics_, settings.data.train, loss_);
    // The validation data fails now, not at the first evaluation, when it
    // is missing or its schema differs from the training data's.
    if (c.rank == 0 && has_validation()) EvalPipeline(settings, "data.valid", statistics_);
    const RankerOptions model = ModelOptions(settings, *train_);
    // On a GPU the tables and state live in device memory (the allocator's
    // error names what it could not get).
    if (!device_.cuda) {
      CheckModelFitsInMemory(settings, model, train_->sparse_names(), AvailableMemoryBytes());
    }
    ranker_ = std::make_unique<Ranker>(model);
    // Initialised on the host (the same values on any device), then moved:
    // the flat buffers, optimizer state and embedding rows live there.
    ranker_->To(TorchDevice(device_));
    sparse_ = std::make_unique<SparseState>(ranker_->tables(), SparseOptionsFrom(settings.optim),
                                            c.comm, int64_t(train_->layout().max_docs));
  }

  const char* unit() const override { return "docs"; }
  torch::nn::Module& dense_module() override { return ranker_->dense_module(); }
  SparseState* sparse() override { return sparse_.get(); }

  // On CUDA the copies run one batch ahead: this batch's copy was launched
  // during the previous micro-batch, and the next one's is launched now,
  // before this one computes.
  //
  // What the host can tell of a batch is computed from it here, so that the
  // device path reads nothing back while it trains on it: the lists' facts
  // for the loss, and on CUDA each table's unique ids for the gather.
  void NextBatch(Phases& phases) override {
    const auto fetch = [&] {
      BatchPtr b;
      {
        const PhaseTimer timer = phases.Time("data_wait");
        b = train_->Next();
      }
      Ready r;
      r.facts = HostListFacts(b->labels_data(), b->offsets_data(), int64_t(b->num_lists));
      std::vector<torch::Tensor> extra;
      if (device_.cuda && !ranker_->tables().empty()) {
        Ranker::Uniques u =
            ranker_->HostUniques(b->sparse_data(), int64_t(b->num_docs), /*pinned=*/true);
        extra = {std::move(u.ids), std::move(u.inverse)};
        r.unique_counts = std::move(u.counts);
      }
      r.batch = copier_.Copy(std::move(b), std::move(extra));
      return r;
    };
    if (!device_.cuda) {
      batch_ = fetch();
      return;
    }
    if (!ahead_) ahead_ = fetch();
    batch_ = std::move(*ahead_);
    ahead_ = fetch();
    copier_.Use(batch_->batch, *phases.device);
  }

  LossTerms Forward(const Precision& precision) override {
    const Ready& r = *batch_;
    const BatchTensors& t = r.batch.t;
    Ranker::Output out = precision.Run([&] {
      if (r.unique_counts.empty()) return ranker_->Forward(t.dense, t.sparse, /*train=*/true);
      return ranker_->Forward(t.dense, t.sparse, /*train=*/true,
                              {r.batch.extra[0], r.batch.extra[1], r.unique_counts});
    });
    if (precision.bf16()) out.scores = out.scores.to(torch::kFloat);
    const RankLossTerms terms =
        RankingLossTerms(loss_, out.scores, t.labels, t.offsets, {}, r.facts);
    sparse_->Add(out.unique_ids, out.rows);
    return {terms.sum, terms.count, int64_t(r.batch.num_docs)};
  }

  void EndMicroBatch() override { batch_.reset(); }

  // The batch copied ahead has not been trained on.
  PipelineState LoaderState() const override {
    PipelineState ps = train_->state();
    if (ahead_) {
      ps.epoch = ahead_->batch.epoch;
      ps.next_batch = ahead_->batch.index;
    }
    return ps;
  }

  std::vector<StageStats> LoaderStages() const override { return train_->Stats().stages; }
  Pipeline& training_pipeline() override { return *train_; }

  bool has_validation() const override { return !settings_.data.valid.empty(); }

  Evaluation Evaluate(const Precision& precision) override {
    const auto valid = EvalPipeline(settings_, "data.valid", statistics_);
    const RankMetricAccumulator acc =
        ScoreLists(*ranker_, *valid, precision, settings_.train.eval_batches, device_);
    return {MetricsOf(acc), acc.Summary()};
  }

  double TrainFlopsPerItem() const override {
    return 3.0 * double(ranker_->ForwardFlopsPerDoc());
  }

  void AddCheckpointFiles(CheckpointWriter& w) const override {
    w.AddFile(kStatisticsFile, statistics_->ToJson());
  }

 private:
  const Settings& settings_;
  ComputeDevice device_;
  RankLoss loss_;
  BatchCopier copier_;
  std::unique_ptr<Pipeline> train_;
  std::shared_ptr<const Manifest> statistics_;  // data.train's
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<SparseState> sparse_;
  // A batch on the device with what the host found in it.
  struct Ready {
    DeviceBatch batch;  // extra (CUDA): the unique ids and inverse of HostUniques
    ListFacts facts;
    std::vector<int64_t> unique_counts;  // CUDA: per table; empty: the gather finds them
  };
  std::optional<Ready> batch_;  // the micro-batch being trained on
  std::optional<Ready> ahead_;  // CUDA: the next batch, its copy in flight
};

}  // namespace

std::unique_ptr<Task> MakeRankerTask(const TaskContext& context) {
  return std::make_unique<RankerTask>(context);
}

}  // namespace topspin
