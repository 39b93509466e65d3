#include "topspin/train/ranker_trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/allocator_policy.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"
#include "topspin/core/progress.h"
#include "topspin/core/strings.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/safetensors.h"
#include "topspin/model/rank_losses.h"
#include "topspin/model/rank_metrics.h"
#include "topspin/model/ranker.h"
#include "topspin/perf/metrics_sink.h"
#include "topspin/perf/tensorboard.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/pipeline/pipeline_config.h"
#include "topspin/train/flat_params.h"
#include "topspin/train/lr_schedule.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<int64_t> Widths(const Config& config, const std::string& key) {
  std::vector<int64_t> out;
  for (const auto& piece : Split(config.GetString(key), ',')) {
    const std::string w(Trim(piece));
    if (w.empty()) continue;
    try {
      size_t used = 0;
      const long long v = std::stoll(w, &used);
      if (used == w.size() && v > 0 && v <= (1 << 20)) {
        out.push_back(v);
        continue;
      }
    } catch (const std::exception&) {
    }
    throw ConfigError(fmt::format("\"{}\" is not a layer width", w), ErrorWhere{.field = key},
                      "write positive integers separated by commas, e.g. \"128,64\"");
  }
  return out;
}

RankerOptions ModelOptions(const Config& config, const Pipeline& p) {
  RankerOptions o;
  o.dense_dim = static_cast<int64_t>(p.layout().dense_dim);
  for (uint64_t c : p.sparse_cardinalities()) o.table_sizes.push_back(static_cast<int64_t>(c));
  o.embedding_dim = config.GetInt("model.embedding_dim");
  o.bottom = Widths(config, "model.bottom");
  o.top = Widths(config, "model.top");
  o.interaction = ParseInteraction(config.GetString("model.interaction"));
  o.cross_layers = static_cast<int>(config.GetInt("model.cross_layers"));
  o.seed = static_cast<uint64_t>(config.GetInt("run.seed"));
  return o;
}

// A batch's arrays as tensors over the pooled memory (no copies); the
// BatchPtr must outlive them.
struct BatchTensors {
  torch::Tensor dense, sparse, labels, offsets;
};
BatchTensors Wrap(Batch& b) {
  const auto n = static_cast<int64_t>(b.num_docs);
  const auto f = static_cast<int64_t>(b.layout().dense_dim);
  const auto c = static_cast<int64_t>(b.layout().sparse_dim);
  return {
      torch::from_blob(b.dense_data(), {n, f}, torch::kFloat),
      torch::from_blob(b.sparse_data(), {n, c}, torch::kLong),
      torch::from_blob(b.labels_data(), {n}, torch::kFloat),
      torch::from_blob(b.offsets_data(), {static_cast<int64_t>(b.num_lists) + 1}, torch::kLong)};
}

// Sums the row gradients of several micro-batches per unique id.
std::pair<torch::Tensor, torch::Tensor> Coalesce(const std::vector<torch::Tensor>& ids,
                                                 const std::vector<torch::Tensor>& grads) {
  if (ids.size() == 1) return {ids[0], grads[0]};
  const auto all_ids = torch::cat(ids), all_grads = torch::cat(grads);
  const auto [unique, inverse, counts] = at::_unique2(all_ids, true, true, false);
  auto summed = torch::zeros({unique.size(0), all_grads.size(1)}, all_grads.options());
  summed.index_add_(0, inverse, all_grads);
  return {unique, summed};
}

SafetensorsTensor View(const std::string& name, const torch::Tensor& t) {
  const auto dtype =
      t.scalar_type() == torch::kLong ? SafetensorsDType::kI64 : SafetensorsDType::kF32;
  std::vector<uint64_t> shape;
  for (int64_t d : t.sizes()) shape.push_back(static_cast<uint64_t>(d));
  return {name, dtype, shape,
          std::span<const std::byte>(static_cast<const std::byte*>(t.data_ptr()), t.nbytes())};
}

// Adds the wall time of its scope to a phase total.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& total) : total_(total), start_(Clock::now()) {}
  ~PhaseTimer() { total_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& total_;
  Clock::time_point start_;
};

class Trainer {
 public:
  Trainer(const Config& config, const RankerTrainOptions& options)
      : config_(config),
        options_(options),
        schedule_(LrSchedule::From(config)),
        loss_kind_(ParseRankLoss(config.GetString("model.loss"))),
        store_(options.run_dir / "checkpoints",
               {.keep_last = static_cast<size_t>(config.GetInt("train.keep_checkpoints"))}) {
    KeepHeapMemory();     // reuse each step's temporaries instead of re-faulting them
    LimitBlasThreads(1);  // LibTorch's intra-op threads parallelise; OpenBLAS would spin
    const int64_t threads = config.GetInt("train.torch_threads");
    if (threads > 0) torch::set_num_threads(static_cast<int>(threads));
    PipelineState start;
    std::optional<Checkpoint> ckpt = FindCheckpoint();
    if (ckpt) start = PipelineStateOf(*ckpt);
    PipelineOptions popt = PipelineOptionsFromConfig(config);
    train_ = std::make_unique<Pipeline>(RankingSpecFromConfig(config, "data.train"), popt, start);
    ranker_ = std::make_unique<Ranker>(ModelOptions(config, *train_));
    flat_ = std::make_unique<FlatParams>(ranker_->dense_module());
    const OptimConfig optim = OptimConfig::From(config);
    dense_opt_ = std::make_unique<DenseOptimizer>(
        flat_->numel(),
        DenseOptimizer::Options{
            .kind = optim.name == "sgd" ? DenseOptimizer::Kind::kSgd : DenseOptimizer::Kind::kAdamW,
            .beta1 = optim.beta1,
            .beta2 = optim.beta2,
            .weight_decay = optim.weight_decay,
            .momentum = optim.momentum});
    const auto sparse_kind = config.GetString("optim.sparse") == "lazy_adam"
                                 ? SparseOptimizer::Kind::kLazyAdam
                                 : SparseOptimizer::Kind::kRowWiseAdagrad;
    for (const auto& table : ranker_->tables()) {
      sparse_opts_.emplace_back(
          table, SparseOptimizer::Options{
                     .kind = sparse_kind, .beta1 = optim.beta1, .beta2 = optim.beta2});
    }
    if (ckpt) Restore(*ckpt);
    fs::create_directories(options.run_dir);
    sinks_.Add(std::make_unique<JsonlWriter>(options.run_dir / "metrics.jsonl"));
    // One event file per process and start step: a resumed run (even within
    // the second its predecessor started) never collides with an old file.
    sinks_.Add(std::make_unique<TensorBoardWriter>(options.run_dir / "tb",
                                                   fmt::format(".{}.from{}", ::getpid(), step_)));
  }

  RankerTrainResult Run() {
    const int64_t steps = config_.GetInt("train.steps");
    const int64_t log_every = config_.GetInt("train.log_every");
    const int64_t eval_every = config_.GetInt("train.eval_every");
    const int64_t ckpt_every = config_.GetInt("train.checkpoint_every");
    ProgressOptions po;
    po.unit = "steps";
    po.interval_s = config_.GetFloat("run.progress_interval_s");
    Progress progress("train", static_cast<uint64_t>(steps), po);
    progress.Update(static_cast<uint64_t>(step_));
    const auto started = Clock::now();
    auto window_start = started;
    double window_loss = 0;
    int64_t window_steps = 0, window_docs = 0, run_steps = 0, run_docs = 0;
    while (step_ < steps) {
      const auto [loss, docs] = Step();
      window_loss += loss;
      window_docs += docs;
      run_docs += docs;
      ++window_steps;
      ++step_;
      ++run_steps;
      progress.Update(static_cast<uint64_t>(step_));
      if (step_ % log_every == 0 || step_ == steps) {
        const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
        result_.last_loss = window_loss / double(window_steps);
        sinks_.Write(step_,
                     {{"loss", result_.last_loss},
                      {"lr", schedule_.At(step_ - 1)},
                      {"docs_per_s", double(window_docs) / secs},
                      {"skipped_steps", double(result_.skipped_steps)}},
                     WallTimeNow());
        window_loss = 0;
        window_steps = window_docs = 0;
        window_start = Clock::now();
      }
      if (options_.stop_after_steps > 0 && run_steps >= options_.stop_after_steps) break;
      const bool last = step_ == steps;
      if ((eval_every > 0 && step_ % eval_every == 0) || last) Evaluate();
      if ((ckpt_every > 0 && step_ % ckpt_every == 0) || last) SaveCheckpoint();
    }
    progress.Finish();
    sinks_.Flush();
    result_.step = step_;
    // Training throughput: wall time less evaluation and checkpoints.
    const double busy = std::chrono::duration<double>(Clock::now() - started).count() -
                        result_.phase_s["eval"] - result_.phase_s["checkpoint"];
    result_.docs_per_s = busy > 0 ? double(run_docs) / busy : 0;
    return result_;
  }

 private:
  // One optimizer step; returns (loss, documents).
  std::pair<double, int64_t> Step() {
    const int64_t accum = config_.GetInt("optim.grad_accum");
    const size_t tables = ranker_->tables().size();
    std::vector<std::vector<torch::Tensor>> ids(tables), grads(tables);
    double loss_sum = 0;
    int64_t docs = 0;
    auto& phase = result_.phase_s;
    for (int64_t a = 0; a < accum; ++a) {
      BatchPtr batch;
      {
        PhaseTimer timer(phase["data_wait"]);
        batch = train_->Next();
      }
      const BatchTensors t = Wrap(*batch);
      std::optional<PhaseTimer> forward(std::in_place, phase["forward"]);
      const Ranker::Output out = ranker_->Forward(t.dense, t.sparse, /*train=*/true);
      const torch::Tensor loss =
          RankingLoss(loss_kind_, out.scores, t.labels, t.offsets) / double(accum);
      forward.reset();
      PhaseTimer backward(phase["backward"]);
      loss.backward();
      loss_sum += loss.item<double>();
      docs += static_cast<int64_t>(batch->num_docs);
      for (size_t c = 0; c < tables; ++c) {
        ids[c].push_back(out.unique_ids[c]);
        grads[c].push_back(out.rows[c].grad());
      }
    }
    PhaseTimer optimizer(phase["optimizer"]);
    std::vector<std::pair<torch::Tensor, torch::Tensor>> rows;
    bool finite = std::isfinite(loss_sum) && flat_->grads().isfinite().all().item<bool>();
    double sq = flat_->grads().pow(2).sum().item<double>();
    for (size_t c = 0; c < tables; ++c) {
      rows.push_back(Coalesce(ids[c], grads[c]));
      finite = finite && rows.back().second.isfinite().all().item<bool>();
      sq += rows.back().second.pow(2).sum().item<double>();
    }
    if (!finite) {
      ++result_.skipped_steps;
      if (++bad_in_a_row_ >= config_.GetInt("train.max_bad_steps")) {
        throw DataError(fmt::format("training diverged: {} steps in a row had a non-finite loss "
                                    "or gradient (last at step {})",
                                    bad_in_a_row_, step_),
                        ErrorWhere{.field = "train.max_bad_steps"},
                        "lower optim.lr or optim.sparse_lr, or set optim.clip_norm");
      }
      spdlog::warn("step {}: non-finite loss or gradient; step skipped ({} in a row)", step_,
                   bad_in_a_row_);
      flat_->ZeroGrad();
      return {loss_sum, docs};
    }
    bad_in_a_row_ = 0;
    const double clip = config_.GetFloat("optim.clip_norm");
    const double norm = std::sqrt(sq);
    if (clip > 0 && norm > clip) {
      const double scale = clip / (norm + 1e-6);
      flat_->grads().mul_(scale);
      for (auto& r : rows) r.second.mul_(scale);
    }
    const double lr = schedule_.At(step_);
    const double sparse_lr = config_.GetFloat("optim.sparse_lr") *
                             (schedule_.peak_lr() > 0 ? lr / schedule_.peak_lr() : 1.0);
    dense_opt_->Step(flat_->params(), flat_->grads(), lr);
    for (size_t c = 0; c < tables; ++c) {
      sparse_opts_[c].Step(ranker_->tables()[c], rows[c].first, rows[c].second, sparse_lr);
    }
    flat_->ZeroGrad();
    return {loss_sum, docs};
  }

  void Evaluate() {
    const std::string& valid = config_.GetString("data.valid");
    if (valid.empty()) return;
    PhaseTimer timer(result_.phase_s["eval"]);
    PipelineOptions o = PipelineOptionsFromConfig(config_);
    o.shuffle = ShuffleMode::kNone;
    o.drop_last = false;
    o.max_epochs = 1;
    Pipeline p(RankingSpecFromConfig(config_, "data.valid"), o);
    RankMetricAccumulator acc;
    const int64_t limit = config_.GetInt("train.eval_batches");
    int64_t n = 0;
    while (BatchPtr b = p.Next()) {
      const BatchTensors t = Wrap(*b);
      const auto scores = ranker_->Forward(t.dense, t.sparse, /*train=*/false).scores.contiguous();
      acc.AddBatch({scores.data_ptr<float>(), b->num_docs}, b->labels(), b->offsets());
      if (limit > 0 && ++n >= limit) break;
    }
    result_.valid_ndcg10 = acc.ndcg(10);
    sinks_.Write(step_,
                 {{"valid/ndcg@1", acc.ndcg(1)},
                  {"valid/ndcg@3", acc.ndcg(3)},
                  {"valid/ndcg@5", acc.ndcg(5)},
                  {"valid/ndcg@10", acc.ndcg(10)},
                  {"valid/map@10", acc.map()},
                  {"valid/mrr", acc.mrr()}},
                 WallTimeNow());
    spdlog::info("step {}: valid {}", step_, acc.Summary());
  }

  // ---- checkpoints ----

  std::vector<std::pair<std::string, torch::Tensor>> StateTensors() {
    std::vector<std::pair<std::string, torch::Tensor>> out = {{"dense.params", flat_->params()}};
    const auto dense_state = dense_opt_->state();
    for (size_t i = 0; i < dense_state.size(); ++i) {
      out.emplace_back(fmt::format("dense.opt{}", i), dense_state[i]);
    }
    for (size_t c = 0; c < ranker_->tables().size(); ++c) {
      out.emplace_back(fmt::format("table{}", c), ranker_->tables()[c]);
      const auto s = sparse_opts_[c].state();
      for (size_t i = 0; i < s.size(); ++i)
        out.emplace_back(fmt::format("table{}.opt{}", c, i), s[i]);
    }
    return out;
  }

  void SaveCheckpoint() {
    PhaseTimer timer(result_.phase_s["checkpoint"]);
    // A checkpoint of this step exists when this run resumed from an older
    // one (the newer was damaged, or the run died after writing it): the
    // deterministic rerun replaces it.
    const fs::path existing = store_.root() / fmt::format("step-{}", step_);
    if (fs::exists(existing)) {
      const fs::path doomed = store_.root() / fmt::format("step-{}.deleting", step_);
      fs::remove_all(doomed);
      fs::rename(existing, doomed);
      fs::remove_all(doomed);
    }
    CheckpointWriter w = store_.Begin(static_cast<uint64_t>(step_));
    const auto state = StateTensors();
    std::vector<SafetensorsTensor> views;
    for (const auto& [name, t] : state) views.push_back(View(name, t));
    w.AddFileWith("model.safetensors",
                  [&](const fs::path& path) { WriteSafetensors(path, views); });
    const PipelineState ps = train_->state();
    nlohmann::json meta{
        {"step", step_},
        {"config_hash", config_.Hash()},
        {"pipeline", {{"seed", ps.seed}, {"epoch", ps.epoch}, {"next_batch", ps.next_batch}}},
        {"dense_steps", dense_opt_->steps()},
        {"skipped_steps", result_.skipped_steps},
        {"bad_in_a_row", bad_in_a_row_}};
    w.SetMeta(meta.dump());
    result_.checkpoint = w.Commit().dir;
  }

  std::optional<Checkpoint> FindCheckpoint() {
    if (options_.resume.empty()) return std::nullopt;
    if (options_.resume == "auto") {
      auto latest = store_.LoadLatest();
      if (!latest) spdlog::info("no checkpoint in {}: starting fresh", store_.root().string());
      return latest;
    }
    const fs::path dir(options_.resume);
    const std::string name = dir.filename().string();
    if (!name.starts_with("step-")) {
      throw ConfigError(fmt::format("{} is not a checkpoint directory (step-N)", dir.string()),
                        ErrorWhere{.file = dir.string()},
                        "pass --resume auto or a step-N directory");
    }
    CheckpointStore store(dir.parent_path());
    return store.Load(std::stoull(name.substr(5)));
  }

  static PipelineState PipelineStateOf(const Checkpoint& c) {
    const auto meta = nlohmann::json::parse(c.meta_json);
    const auto& p = meta.at("pipeline");
    return {p.at("seed").get<uint64_t>(), p.at("epoch").get<uint64_t>(),
            p.at("next_batch").get<uint64_t>()};
  }

  void Restore(const Checkpoint& c) {
    const auto meta = nlohmann::json::parse(c.meta_json);
    if (meta.at("config_hash").get<std::string>() != config_.Hash()) {
      throw ConfigError(
          fmt::format("checkpoint {} was written with config hash {}, this run has {}",
                      c.dir.string(), meta.at("config_hash").get<std::string>(), config_.Hash()),
          ErrorWhere{.file = c.dir.string()},
          "resume with the run's config (its config.yaml); `topspin config hash` "
          "shows what a config hashes to");
    }
    const SafetensorsFile file = SafetensorsFile::Open(c.FilePath("model.safetensors"));
    for (auto& [name, t] : StateTensors()) {
      const TensorView* v = file.Find(name);
      if (v == nullptr || v->bytes.size() != t.nbytes()) {
        throw DataError(
            fmt::format("checkpoint tensor \"{}\" is missing or has the wrong size", name),
            ErrorWhere{.file = file.path().string(), .field = name},
            "the checkpoint was written by a different model configuration");
      }
      std::memcpy(t.data_ptr(), v->bytes.data(), v->bytes.size());
    }
    step_ = meta.at("step").get<int64_t>();
    // StateTensors() are the live tensors: the copies above restored them.
    const auto optimizer_steps = meta.at("dense_steps").get<int64_t>();
    dense_opt_->set_steps(optimizer_steps);
    for (auto& s : sparse_opts_) s.set_steps(optimizer_steps);
    result_.skipped_steps = meta.at("skipped_steps").get<int64_t>();
    bad_in_a_row_ = meta.at("bad_in_a_row").get<int64_t>();
    result_.resumed_from = step_;
    spdlog::info("resumed from {} (step {})", c.dir.string(), step_);
  }

  const Config& config_;
  RankerTrainOptions options_;
  LrSchedule schedule_;
  RankLoss loss_kind_;
  CheckpointStore store_;
  std::unique_ptr<Pipeline> train_;
  std::unique_ptr<Ranker> ranker_;
  std::unique_ptr<FlatParams> flat_;
  std::unique_ptr<DenseOptimizer> dense_opt_;
  std::vector<SparseOptimizer> sparse_opts_;
  MultiSink sinks_;
  int64_t step_ = 0, bad_in_a_row_ = 0;
  RankerTrainResult result_;
};

}  // namespace

std::string DescribePhases(const RankerTrainResult& r) {
  double total = 0;
  for (const auto& [name, s] : r.phase_s) total += s;
  std::string out;
  for (const char* name : {"data_wait", "forward", "backward", "optimizer", "eval", "checkpoint"}) {
    const auto it = r.phase_s.find(name);
    if (it == r.phase_s.end()) continue;
    std::string label(name);
    std::replace(label.begin(), label.end(), '_', ' ');
    out += fmt::format("{}{} {:.1f}% ({:.2f} s)", out.empty() ? "" : ", ", label,
                       total > 0 ? 100 * it->second / total : 0.0, it->second);
  }
  return out;
}

RankerTrainResult TrainRanker(const Config& config, const RankerTrainOptions& options) {
  Trainer trainer(config, options);
  return trainer.Run();
}

}  // namespace topspin
