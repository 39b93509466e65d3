#include "topspin/train/ranker_trainer.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/test_util.h"
#include "train/train_test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/data/safetensors.h"
#include "topspin/dist/spawn.h"
#include "topspin/model/rank_metrics.h"
#include "topspin/train/lr_schedule.h"
#include "topspin/pipeline/shop_features.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using testing::FinalSha;
using testing::Losses;

// The process policy `topspin train` sets at start-up (the test configs
// use train.torch_threads 1).
const auto* const kPolicy = ::testing::AddGlobalTestEnvironment([] {
  struct Policy : ::testing::Environment {
    void SetUp() override { ApplyProcessPolicy(1); }
  };
  return new Policy;
}());

struct Data {
  testing::TempDir dir;
  fs::path train = dir / "train", valid = dir / "valid";
  Data() {
    // Ranks of the data-parallel tests read their parent's data (the same
    // paths, so the same config hash).
    if (const char* parent = std::getenv("TOPSPIN_TEST_DATA"); parent != nullptr) {
      train = fs::path(parent) / "train";
      valid = fs::path(parent) / "valid";
      return;
    }
    DatasetWriterOptions w;
    w.row_group_rows = 2000;
    WriteShopShards(train, ShopOptions{.queries = 400, .seed = 1, .threads = 1}, w);
    WriteShopShards(valid, ShopOptions{.queries = 100, .seed = 2, .threads = 1}, w);
  }
};

const Data& SharedData() {
  static const Data data;
  return data;
}

std::string YamlList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& i : items) out += fmt::format("{}\"{}\"", out.size() > 1 ? ", " : "", i);
  return out + "]";
}

Config TestConfig(const std::vector<std::string>& extra = {}) {
  const std::string yaml = fmt::format(R"yaml(
run: {{seed: 7}}
data: {{train: "{}", valid: "{}"}}
pipeline:
  threads: 2
  batch_size: 16
  shuffle: global
  dense: {}
  sparse: {}
model: {{embedding_dim: 8, bottom: "32", top: "32", loss: softmax}}
optim: {{lr: 0.003, warmup_steps: 5, sparse_lr: 0.05}}
train: {{steps: 30, log_every: 10, eval_every: 15, checkpoint_every: 10, torch_threads: 1}}
)yaml",
                                       SharedData().train.string(), SharedData().valid.string(),
                                       YamlList(ShopDenseChains()), YamlList(ShopSparseChains()));
  return Config::Parse(yaml, "test.yaml", extra, TopspinSchema());
}

TEST(RankerTrainer, LearnsLogsEvaluatesAndCheckpoints) {
  testing::TempDir run;
  const Config config = TestConfig();
  const RankerTrainResult r = TrainRanker(config, {.run_dir = run.path()});
  EXPECT_EQ(r.step, 30);
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_GT(r.valid_ndcg10, 0.5);
  EXPECT_TRUE(std::isfinite(r.last_loss));
  EXPECT_GT(r.items_per_s, 0);
  // metrics.jsonl: three training records and two evaluations.
  std::ifstream in(run / "metrics.jsonl");
  int train_lines = 0, eval_lines = 0;
  double first_loss = 0, last_loss = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      (train_lines++ == 0 ? first_loss : last_loss) = j["loss"].get<double>();
      // Each window's phases (ms per step) and loader-stage use (the
      // report's stacked bars): every phase present, the steps' own
      // phases non-zero, the shares of the loader's threads in [0, 1].
      for (const auto& phase : ProfilePhases()) EXPECT_TRUE(j.contains("phase_ms/" + phase)) << phase;
      EXPECT_GT(j["phase_ms/forward"].get<double>(), 0);
      EXPECT_GT(j["phase_ms/backward"].get<double>(), 0);
      // The window's learning rate and mean gradient norm.
      EXPECT_GT(j["lr"].get<double>(), 0);
      ASSERT_TRUE(j.contains("grad_norm"));
      EXPECT_GT(j["grad_norm"].get<double>(), 0);
      EXPECT_TRUE(std::isfinite(j["grad_norm"].get<double>()));
      for (const char* stage : {"read", "decode", "transform", "assemble"}) {
        const std::string key = std::string("loader_busy/") + stage;
        ASSERT_TRUE(j.contains(key)) << key;
        EXPECT_GE(j[key].get<double>(), 0);
        EXPECT_LE(j[key].get<double>(), 1.05);
      }
      ASSERT_TRUE(j.contains("loader_reloads"));
      EXPECT_EQ(j["loader_reloads"].get<double>(), 0);  // the data fits the cache
      // The loader's work before the first step (it reads ahead while the
      // model is built) counts in the first window.
      if (train_lines == 1) {
        EXPECT_GT(j["loader_busy/decode"].get<double>(), 0) << line;
      }
      // Evaluation and checkpoint time lands in the window it happened in:
      // the checkpoint at step 10, the evaluation at step 15.
      const int64_t step = j["step"].get<int64_t>();
      if (step == 10) {
        EXPECT_GT(j["phase_ms/checkpoint"].get<double>(), 0) << line;
        EXPECT_EQ(j["phase_ms/eval"].get<double>(), 0) << line;
      }
      if (step == 20) {
        EXPECT_GT(j["phase_ms/eval"].get<double>(), 0) << line;
      }
    }
    if (j.contains("valid/ndcg@10")) ++eval_lines;
  }
  EXPECT_EQ(train_lines, 3);
  EXPECT_EQ(eval_lines, 2);
  EXPECT_LT(last_loss, first_loss);  // it learns
  EXPECT_FALSE(fs::is_empty(run / "tb"));
  const auto steps = CheckpointStore(run / "checkpoints").List();
  // Every 10 steps, and step 15: its evaluation was the first, so the best
  // so far (train.best), checkpointed at once. Keep 3: 10 is pruned.
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].step, 15u);
  EXPECT_EQ(steps.back().step, 30u);
}

TEST(RankerTrainer, ResumedRunIsBitwiseIdentical) {
  testing::TempDir straight, interrupted;
  const Config config = TestConfig();
  TrainRanker(config, {.run_dir = straight.path()});
  // Dies after 13 steps (checkpoint at 10), then resumes and finishes.
  const auto partial = TrainRanker(config, {.run_dir = interrupted.path(), .stop_after_steps = 13});
  EXPECT_EQ(partial.step, 13);
  const auto resumed = TrainRanker(config, {.run_dir = interrupted.path(), .resume = "auto"});
  EXPECT_EQ(resumed.resumed_from, 10);
  EXPECT_EQ(resumed.step, 30);
  // The resumed run's first record says where it took over (the report's marker).
  int resume_marks = 0;
  std::ifstream metrics(interrupted / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("resumed_from")) {
      ++resume_marks;
      EXPECT_EQ(j["resumed_from"].get<double>(), 10);
      EXPECT_EQ(j["step"].get<int64_t>(), 20);
    }
  }
  EXPECT_EQ(resume_marks, 1);
  EXPECT_EQ(FinalSha(straight.path()), FinalSha(interrupted.path()));
  // A different config is refused.
  try {
    TrainRanker(TestConfig({"optim.lr=0.01"}), {.run_dir = interrupted.path(), .resume = "auto"});
    FAIL() << "resumed with another config";
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("config hash"), std::string::npos) << e.Message();
    // ...naming each key that differs.
    EXPECT_NE(e.Message().find("optim.lr is 0.003 in the checkpoint and 0.01 here"),
              std::string::npos)
        << e.Message();
  }
}

TEST(RankerTrainer, EvaluateScoresACheckpointWithoutTheTrainingData) {
  testing::TempDir run;
  const RankerTrainResult r = TrainRanker(TestConfig(), {.run_dir = run.path()});
  // The training data is gone: the checkpoint's statistics transform the
  // held-out data exactly as training did, so the metrics agree.
  const RankerEvalResult e = EvaluateRanker(TestConfig({"data.train=/nonexistent"}), run.path(),
                                            "data.valid", CheckpointChoice::kLatest);
  EXPECT_EQ(e.step, 30);
  EXPECT_EQ(e.lists, 100u);
  EXPECT_DOUBLE_EQ(e.metrics.at("ndcg@10"), r.valid_ndcg10);
  const auto step20 = run / "checkpoints" / "step-20";
  const RankerEvalResult early = EvaluateRanker(TestConfig(), step20);
  EXPECT_EQ(early.step, 20);
  EXPECT_NE(early.metrics.at("ndcg@10"), e.metrics.at("ndcg@10"));
  for (const char* m : {"ndcg@1", "ndcg@3", "ndcg@5", "map@10", "mrr"}) {
    EXPECT_GT(e.metrics.at(m), 0.0) << m;
    EXPECT_LE(e.metrics.at(m), 1.0) << m;
  }
  // Another model shape is refused, naming the tensor.
  try {
    EvaluateRanker(TestConfig({"model.embedding_dim=4"}), run.path());
    FAIL() << "evaluated with another model";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "dense.top.0.weight") << e.Message();
  }
  try {
    EvaluateRanker(TestConfig(), run / "checkpoints");
    FAIL() << "accepted a directory that is no checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("step-N"), std::string::npos) << e.Message();
  }
}

TEST(RankerTrainer, ExtendTrainsAFinishedRunOnWithTheLongerSchedule) {
  testing::TempDir run;
  const std::vector<std::string> o = {"train.steps=20", "train.eval_every=0", "data.valid="};
  TrainRanker(TestConfig(o), {.run_dir = run.path()});
  std::vector<std::string> longer = o;
  longer.push_back("train.steps=30");
  // A plain resume with more steps is refused, saying what to add.
  try {
    TrainRanker(TestConfig(longer), {.run_dir = run.path(), .resume = "auto"});
    FAIL() << "resumed with another train.steps";
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("train.steps is 20 in the checkpoint and 30 here"), std::string::npos)
        << e.Message();
    EXPECT_NE(e.hint().find("--extend"), std::string::npos) << e.hint();
  }
  // --extend with another key changed too names it and points at --init-from.
  std::vector<std::string> other = longer;
  other.push_back("optim.lr=0.01");
  try {
    TrainRanker(TestConfig(other), {.run_dir = run.path(), .resume = "auto", .extend = true});
    FAIL() << "extended with another learning rate";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "optim.lr") << e.Message();
    EXPECT_NE(e.hint().find("--init-from"), std::string::npos) << e.hint();
  }
  // Fewer steps is no extension.
  std::vector<std::string> shorter = o;
  shorter.push_back("train.steps=15");
  EXPECT_THROW(
      TrainRanker(TestConfig(shorter), {.run_dir = run.path(), .resume = "auto", .extend = true}),
      Error);
  const auto r =
      TrainRanker(TestConfig(longer), {.run_dir = run.path(), .resume = "auto", .extend = true});
  EXPECT_EQ(r.resumed_from, 20);
  EXPECT_EQ(r.step, 30);
  // The run's config.yaml now says 30 steps: a later resume takes it as is.
  EXPECT_NE(ReadFile(run / "config.yaml").find("steps: 30"), std::string::npos);
  // The extended schedule: step 21's record has the lr of a 30-step cosine.
  double lr_at_30 = -1;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("step", 0) == 30 && j.contains("lr")) lr_at_30 = j["lr"].get<double>();
  }
  const Config c = TestConfig(longer);
  EXPECT_DOUBLE_EQ(lr_at_30, LrSchedule::From(c).At(29));
}

torch::Tensor FinalParams(const fs::path& run);  // below, with the data-parallel tests

TEST(RankerTrainer, InitFromStartsANewRunFromACheckpointsWeights) {
  testing::TempDir base, tuned, other;
  const std::vector<std::string> o = {"train.steps=10", "train.eval_every=0", "data.valid="};
  TrainRanker(TestConfig(o), {.run_dir = base.path()});
  // lr 0 and no decay: one step leaves the weights where they started, so
  // the new run's checkpoint holds the base run's weights exactly.
  std::vector<std::string> frozen = o;
  for (const char* kv : {"train.steps=1", "train.checkpoint_every=1", "optim.lr=0",
                         "optim.sparse_lr=0", "optim.warmup_steps=0", "optim.weight_decay=0"}) {
    frozen.push_back(kv);
  }
  const auto r = TrainRanker(TestConfig(frozen), {.run_dir = tuned.path(), .init_from = base.path()});
  EXPECT_EQ(r.resumed_from, -1);
  EXPECT_EQ(r.step, 1);
  EXPECT_TRUE(torch::equal(FinalParams(base.path()), FinalParams(tuned.path())));
  const auto meta = nlohmann::json::parse(
      CheckpointStore(tuned / "checkpoints").LoadLatest()->meta_json);
  EXPECT_NE(meta.value("init_from", std::string()).find("step-10"), std::string::npos);
  // Another model shape is refused, naming the tensor.
  std::vector<std::string> wider = o;
  wider.push_back("model.top=64");
  try {
    TrainRanker(TestConfig(wider), {.run_dir = other.path(), .init_from = base.path()});
    FAIL() << "initialised another model shape";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_EQ(e.where().field.rfind("dense.top", 0), 0u) << e.Message();
  }
}

TEST(RankerTrainer, ScoreWritesEveryDocumentInDatasetOrderAndAgreesWithEval) {
  testing::TempDir run;
  const std::vector<std::string> o = {"train.steps=10", "train.eval_every=0"};
  TrainRanker(TestConfig(o), {.run_dir = run.path()});
  std::vector<float> scores, labels;
  std::vector<int64_t> list_sizes;
  const auto r = ScoreRanker(TestConfig(o), run.path(), SharedData().valid, [&](const ScoredBatch& b) {
    EXPECT_TRUE(b.labeled);
    scores.insert(scores.end(), b.scores.begin(), b.scores.end());
    labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    for (size_t i = 0; i + 1 < b.offsets.size(); ++i) {
      list_sizes.push_back(b.offsets[i + 1] - b.offsets[i]);
    }
  });
  const Manifest m = Manifest::Load(SharedData().valid);
  EXPECT_EQ(r.step, 10);
  EXPECT_EQ(r.docs, m.rows());
  EXPECT_EQ(r.lists, m.group_stats.groups);
  ASSERT_EQ(scores.size(), m.rows());
  // Dataset order: the labels are the label column, row by row.
  const DatasetReader reader(SharedData().valid);
  std::vector<float> column;
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    const ShardReader& shard = reader.shard(s);
    for (size_t g = 0; g < shard.num_row_groups(); ++g) {
      const Column c = shard.ReadChunk(g, shard.ColumnIndex(m.label_column));
      for (size_t i = 0; i < c.size(); ++i) column.push_back(float(c.AsDouble(i)));
    }
  }
  EXPECT_EQ(labels, column);
  // The metrics of these scores are eval's.
  RankMetricAccumulator acc;
  std::vector<int64_t> offsets = {0};
  for (int64_t n : list_sizes) offsets.push_back(offsets.back() + n);
  acc.AddBatch(scores, labels, offsets);
  const RankerEvalResult e = EvaluateRanker(TestConfig(o), run.path());
  EXPECT_NEAR(acc.ndcg(10), e.metrics.at("ndcg@10"), 1e-12);
}

TEST(RankerTrainer, ScoreReadsDataWithoutTheLabelColumn) {
  testing::TempDir run, unlabeled;
  const std::vector<std::string> o = {"train.steps=10", "train.eval_every=0", "data.valid="};
  TrainRanker(TestConfig(o), {.run_dir = run.path()});
  // The held-out data with its label column dropped.
  const DatasetReader reader(SharedData().valid);
  const Manifest& m = reader.manifest();
  DatasetWriterOptions w;
  w.out = unlabeled / "data";
  for (const ColumnSpec& c : m.schema) {
    if (c.name != m.label_column) w.schema.push_back(c);
  }
  w.group_column = m.group_column;
  DatasetWriter writer(w);
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g) {
      Table t = reader.shard(s).ReadRowGroup(g);
      std::erase_if(t.columns, [&](const Column& c) { return c.name() == m.label_column; });
      writer.Append(t);
    }
  }
  writer.Commit();
  std::vector<float> with, without;
  ScoreRanker(TestConfig(o), run.path(), SharedData().valid, [&](const ScoredBatch& b) {
    with.insert(with.end(), b.scores.begin(), b.scores.end());
  });
  const auto r = ScoreRanker(TestConfig(o), run.path(), unlabeled / "data", [&](const ScoredBatch& b) {
    EXPECT_FALSE(b.labeled);
    without.insert(without.end(), b.scores.begin(), b.scores.end());
  });
  EXPECT_FALSE(r.labeled);
  EXPECT_EQ(with, without);
}

TEST(RankerTrainer, KeepsTheBestCheckpointAndStopsEarlyAlsoAfterAResume) {
  // min_delta 1: no evaluation after the first counts as better, so the
  // best is step 5 and patience 2 stops the run at the evaluation of step 15.
  const std::vector<std::string> o = {
      "train.steps=60",           "train.eval_every=5",
      "train.checkpoint_every=50", "train.keep_checkpoints=1",
      "train.early_stop.patience=2", "train.early_stop.min_delta=1"};
  testing::TempDir straight, interrupted;
  const auto r = TrainRanker(TestConfig(o), {.run_dir = straight.path()});
  EXPECT_EQ(r.step, 15);
  EXPECT_EQ(r.best_step, 5);
  EXPECT_EQ(r.best_metric, "ndcg@10");
  EXPECT_NE(r.early_stop.find("has not improved by more than 1 in 2 evaluations"),
            std::string::npos)
      << r.early_stop;
  EXPECT_FALSE(r.stopped);  // not a signal
  // The best is kept although keep_checkpoints is 1, and best.json names it.
  std::vector<uint64_t> steps;
  for (const auto& c : CheckpointStore(straight / "checkpoints").List()) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<uint64_t>{5, 15}));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(straight / "best.json"))["step"].get<int64_t>(), 5);
  // Evaluation records say which step is the best so far.
  std::ifstream in(straight / "metrics.jsonl");
  int64_t last_best = -1;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("valid/ndcg@10")) last_best = j.at("best_step").get<int64_t>();
  }
  EXPECT_EQ(last_best, 5);
  // summary.json: the run's result for scripts.
  const auto summary = nlohmann::json::parse(ReadFile(straight / "summary.json"));
  EXPECT_EQ(summary["step"].get<int64_t>(), 15);
  EXPECT_EQ(summary["best"]["step"].get<int64_t>(), 5);
  EXPECT_EQ(summary["early_stop"].get<std::string>(), r.early_stop);
  EXPECT_EQ(summary["dense_params"].get<int64_t>(), r.dense_params);
  EXPECT_FALSE(summary["stopped_by_signal"].get<bool>());
  // eval and score use the best by default, the newest on request.
  EXPECT_EQ(EvaluateRanker(TestConfig(o), straight.path()).step, 5);
  EXPECT_EQ(EvaluateRanker(TestConfig(o), straight.path(), "data.valid", CheckpointChoice::kLatest)
                .step,
            15);
  // Killed at step 12, resumed from the best checkpoint (step 5): the
  // judgement state came back with it, and the run ends the same way.
  TrainRanker(TestConfig(o), {.run_dir = interrupted.path(), .stop_after_steps = 12});
  const auto resumed = TrainRanker(TestConfig(o), {.run_dir = interrupted.path(), .resume = "auto"});
  EXPECT_EQ(resumed.resumed_from, 5);
  EXPECT_EQ(resumed.step, 15);
  EXPECT_EQ(resumed.best_step, 5);
  EXPECT_EQ(FinalSha(straight.path()), FinalSha(interrupted.path()));
}

TEST(RankerTrainer, BestMetricNoneTurnsTheBestCheckpointOff) {
  testing::TempDir run;
  const std::vector<std::string> o = {"train.steps=20", "train.eval_every=5",
                                      "train.checkpoint_every=10", "train.best.metric=none"};
  const auto r = TrainRanker(TestConfig(o), {.run_dir = run.path()});
  EXPECT_EQ(r.best_step, -1);
  EXPECT_FALSE(fs::exists(run / "best.json"));
  std::vector<uint64_t> steps;
  for (const auto& c : CheckpointStore(run / "checkpoints").List()) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<uint64_t>{10, 20}));  // no extra checkpoint at an evaluation
  // Early stopping needs a metric.
  std::vector<std::string> stop = o;
  stop.push_back("train.early_stop.patience=2");
  try {
    CheckTrainConfig(TestConfig(stop));
    FAIL() << "early stopping without a metric";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "train.early_stop.patience") << e.Message();
  }
  // The GPT's keys do nothing for the ranker: refused, not ignored.
  try {
    CheckTrainConfig(TestConfig({"model.gpt.layers=2"}));
    FAIL() << "a GPT key in a ranker config";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "model.gpt.layers") << e.Message();
    EXPECT_NE(e.Message().find("model.kind ranker does not read it"), std::string::npos);
  }
}

TEST(RankerTrainer, Bf16AutocastTrainsLikeFp32) {
  testing::TempDir fp32_run, bf16_run;
  const auto fp32 = TrainRanker(TestConfig(), {.run_dir = fp32_run.path()});
  const auto bf16 = TrainRanker(TestConfig({"train.precision=bf16"}), {.run_dir = bf16_run.path()});
  // bf16 matmuls change the numbers (it really ran in bf16) but not the outcome.
  EXPECT_NE(FinalSha(fp32_run.path()), FinalSha(bf16_run.path()));
  EXPECT_NEAR(bf16.last_loss, fp32.last_loss, 0.02 * std::abs(fp32.last_loss));
  EXPECT_NEAR(bf16.valid_ndcg10, fp32.valid_ndcg10, 0.02);
}

// ---- data parallel: this binary runs DataParallelRank.* as ranks ----

const char* RankDir() { return std::getenv("TOPSPIN_TEST_DIR"); }
const std::vector<std::string> kDistSteps = {"train.steps=8", "train.log_every=1",
                                             "train.eval_every=0", "train.checkpoint_every=0",
                                             "data.valid="};

// Extra overrides for the ranks, ';'-separated in TOPSPIN_TEST_SET.
std::vector<std::string> RankOverrides() {
  std::vector<std::string> out = kDistSteps;
  if (const char* extra = std::getenv("TOPSPIN_TEST_SET"); extra != nullptr && *extra) {
    for (const auto& kv : Split(extra, ';')) out.push_back(kv);
  }
  return out;
}

TEST(DataParallelRank, Train) {
  if (RankDir() == nullptr) GTEST_SKIP() << "worker: runs under RankerTrainer.DataParallel*";
  RankerTrainOptions o{.run_dir = RankDir()};
  o.launch = DetectLaunchEnv();
  o.rendezvous.file_store = fs::path(RankDir()) / "store";
  o.rendezvous.timeout = std::chrono::seconds(60);
  const auto r = TrainRanker(TestConfig(RankOverrides()), o);
  // What the parent checks: P, this rank's optimizer state and gradients.
  WriteFileAtomic(fs::path(RankDir()) / fmt::format("memory.{}", o.launch.rank),
                  fmt::format("{} {} {}", r.dense_params, r.dense_optimizer_bytes,
                              r.dense_grad_bytes));
}

// Trains in `dir` with `world` ranks (`extra`: more overrides, ';'-separated).
void TrainWorld(int world, const fs::path& dir, const std::string& extra = "") {
  if (world == 1) {
    TrainRanker(TestConfig(kDistSteps), {.run_dir = dir});
    return;
  }
  SpawnOptions o;
  o.argv = {"/proc/self/exe", "--gtest_filter=DataParallelRank.Train"};
  o.nproc = world;
  o.grace_s = 5;
  o.extra_env = {{"TOPSPIN_TEST_DIR", dir.string()},
                 {"TOPSPIN_TEST_SET", extra},
                 {"TOPSPIN_TEST_DATA", SharedData().dir.path().string()}};
  const SpawnResult r = SpawnAndSupervise(o);
  ASSERT_EQ(r.exit_code, 0) << r.cause;
}

TEST(RankerTrainer, DataParallelMatchesOneProcessAndRepeatsBitwise) {
  testing::TempDir one, two, two_again, four;
  TrainWorld(1, one.path());
  TrainWorld(2, two.path());
  TrainWorld(2, two_again.path());
  TrainWorld(4, four.path());
  // The same global batches at every world size: per-step losses agree to
  // float rounding of the sums.
  const auto reference = Losses(one.path());
  ASSERT_EQ(reference.size(), 8u);
  for (const auto* run : {&two, &four}) {
    const auto losses = Losses(run->path());
    ASSERT_EQ(losses.size(), reference.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], reference[i], 1e-5 * std::abs(reference[i])) << "step " << i + 1;
    }
  }
  // The same world twice: bitwise the same parameters.
  EXPECT_EQ(FinalSha(two.path()), FinalSha(two_again.path()));
  EXPECT_EQ(Losses(two.path()), Losses(two_again.path()));
}

TEST(RankerTrainer, EveryRankStopsEarlyAtTheStepRankZeroJudged) {
  // Rank 0 evaluates and broadcasts its verdict: both ranks checkpoint the
  // best (step 2) and stop together at step 6, as one process does.
  const std::string extra = "data.valid=" + SharedData().valid.string() +
                            ";train.eval_every=2;train.early_stop.patience=2"
                            ";train.early_stop.min_delta=1";
  testing::TempDir one, two;
  std::vector<std::string> overrides = kDistSteps;
  for (const auto& kv : Split(extra, ';')) overrides.push_back(kv);
  const auto r = TrainRanker(TestConfig(overrides), {.run_dir = one.path()});
  EXPECT_EQ(r.step, 6);
  EXPECT_EQ(r.best_step, 2);
  TrainWorld(2, two.path(), extra);
  const auto summary = nlohmann::json::parse(ReadFile(two / "summary.json"));
  EXPECT_EQ(summary["step"].get<int64_t>(), 6);
  EXPECT_EQ(summary["best"]["step"].get<int64_t>(), 2);
  EXPECT_EQ(summary["world_size"].get<int64_t>(), 2);
  EXPECT_FALSE(summary["early_stop"].get<std::string>().empty());
  std::vector<uint64_t> steps;
  for (const auto& c : CheckpointStore(two / "checkpoints").List()) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<uint64_t>{2, 6}));
}

// What rank `rank` of a run reported.
struct RankBytes {
  int64_t params = 0, optimizer = 0, grads = 0;
};
RankBytes RankMemory(const fs::path& run, int rank) {
  std::istringstream in(ReadFile(run / fmt::format("memory.{}", rank)));
  RankBytes out;
  in >> out.params >> out.optimizer >> out.grads;
  return out;
}

// The dense parameters of a checkpoint file, flat: its "dense.<module>"
// tensors in file order (the flat buffer's), optimizer state left out.
torch::Tensor DenseFromFile(const SafetensorsFile& file) {
  std::vector<torch::Tensor> parts;
  for (const TensorView& v : file.tensors()) {
    if (!v.name.starts_with("dense.") || v.name.starts_with("dense.opt")) continue;
    auto t = torch::empty({int64_t(v.bytes.size() / sizeof(float))}, torch::kFloat);
    std::memcpy(t.data_ptr(), v.bytes.data(), v.bytes.size());
    parts.push_back(t);
  }
  EXPECT_FALSE(parts.empty());
  return parts.empty() ? torch::Tensor() : torch::cat(parts);
}

// The flat dense parameters of a run's newest checkpoint.
torch::Tensor FinalParams(const fs::path& run) {
  const auto c = CheckpointStore(run / "checkpoints").LoadLatest();
  EXPECT_TRUE(c.has_value());
  if (!c) return {};
  const SafetensorsFile file = SafetensorsFile::Open(c->FilePath("model.safetensors"));
  return DenseFromFile(file);
}

TEST(RankerTrainer, Zero1MatchesDataParallelBitwiseAndShardsTheState) {
  testing::TempDir plain, zero, resumed;
  TrainWorld(2, plain.path());
  TrainWorld(4, zero.path(), "dist.zero=1");
  TrainWorld(2, resumed.path(), "dist.zero=1;train.checkpoint_every=4");
  // Sharding the optimizer changes where the update runs, not what it is:
  // the whole saved state (parameters, gathered moments, tables) is bitwise
  // that of plain data parallel, at world 2 and world 4.
  EXPECT_EQ(FinalSha(plain.path()), FinalSha(resumed.path()));
  EXPECT_EQ(Losses(plain.path()), Losses(resumed.path()));
  const auto loss3 = Losses(zero.path()), loss2 = Losses(plain.path());
  ASSERT_EQ(loss3.size(), loss2.size());
  for (size_t i = 0; i < loss2.size(); ++i) EXPECT_NEAR(loss3[i], loss2[i], 1e-5 * loss2[i]);
  // Per-rank AdamW state: 8P bytes without ZeRO, 8P / world with it (the
  // ZeRO-1 formula) within 5%; the shards cover P exactly.
  const int64_t p = RankMemory(plain.path(), 0).params;
  EXPECT_EQ(RankMemory(plain.path(), 0).optimizer, 8 * p);
  int64_t covered = 0;
  for (int r = 0; r < 4; ++r) {
    const RankBytes m = RankMemory(zero.path(), r);
    EXPECT_EQ(m.params, p);
    if (r < 3) {
      EXPECT_NEAR(double(m.optimizer), 8.0 * double(p) / 4, 0.05 * 8.0 * double(p) / 4);
    }
    EXPECT_EQ(m.grads, 4 * p);  // ZeRO-1 keeps whole gradients
    covered += m.optimizer;
  }
  EXPECT_EQ(covered, 8 * p);
  // A sharded run's checkpoint (step 4) resumes in one process, another
  // world size, and finishes like the world-2 run.
  fs::remove_all(resumed / "checkpoints" / "step-8");
  const auto more = TrainRanker(TestConfig(kDistSteps), {.run_dir = resumed.path(), .resume = "auto"});
  EXPECT_EQ(more.resumed_from, 4);
  EXPECT_EQ(more.step, 8);
  EXPECT_NEAR(more.last_loss, loss2.back(), 1e-5 * loss2.back());
}

TEST(RankerTrainer, Zero2MatchesDataParallelAndShardsGradients) {
  testing::TempDir plain, zero2, zero2_again;
  // Clipping on: the gradient norm is summed from the ranks' shards.
  TrainWorld(2, plain.path(), "optim.clip_norm=0.5");
  TrainWorld(2, zero2.path(), "optim.clip_norm=0.5;dist.zero=2;dist.bucket_mib=1");
  TrainWorld(2, zero2_again.path(), "optim.clip_norm=0.5;dist.zero=2;dist.bucket_mib=1");
  // Reduce-scattered gradients train the same model as all-reduced ones.
  const auto a = FinalParams(plain.path()), b = FinalParams(zero2.path());
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-6);
  const auto la = Losses(plain.path()), lb = Losses(zero2.path());
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(lb[i], la[i], 1e-6 * la[i]) << i;
  // And repeat bitwise.
  EXPECT_EQ(FinalSha(zero2.path()), FinalSha(zero2_again.path()));
  // Per rank: gradients 4P / 2 and AdamW state 8P / 2 (the ZeRO-2 formula)
  // within 5%, against 4P and 8P without sharding.
  const RankBytes whole = RankMemory(plain.path(), 0);
  EXPECT_EQ(whole.grads, 4 * whole.params);
  for (int r = 0; r < 2; ++r) {
    const RankBytes m = RankMemory(zero2.path(), r);
    EXPECT_NEAR(double(m.grads), 4.0 * double(m.params) / 2, 0.05 * 4.0 * double(m.params) / 2);
    EXPECT_NEAR(double(m.optimizer), 8.0 * double(m.params) / 2,
                0.05 * 8.0 * double(m.params) / 2);
  }
}

// ---- the reference run: the trainer's results, recorded ----
//
// Per-step losses and the final checkpoint's SHA-256 of three runs,
// recorded in testdata/reference_run.json before the trainer core was
// refactored (2026-12-02, commit dfc948e): every later change to the
// trainer must reproduce them bit for bit, or change the file on purpose
// (TOPSPIN_RECORD_REFERENCE=1 rewrites it, and the diff shows what moved).
// Bits depend on the kernels LibTorch dispatches to: the file names the
// torch version and CPU capability it was recorded with, and a machine
// with others skips, saying so.

struct ReferenceCase {
  const char* name;
  int world;
  const char* overrides;  // ';'-separated
};

constexpr ReferenceCase kReferenceCases[] = {
    {"adamw_adagrad_accum2_clip", 1, "optim.grad_accum=2;optim.clip_norm=0.5"},
    {"bf16", 1, "train.precision=bf16"},
    {"sgd_lazy_adam_zero2_world2", 2,
     "optim.name=sgd;optim.sparse=lazy_adam;dist.zero=2;optim.clip_norm=0.5;dist.bucket_mib=1"},
};

fs::path ReferenceFile() { return fs::path(__FILE__).parent_path() / "testdata/reference_run.json"; }

nlohmann::json RunReferenceCase(const ReferenceCase& c) {
  testing::TempDir run;
  if (c.world == 1) {
    std::vector<std::string> o = kDistSteps;
    for (const auto& kv : Split(c.overrides, ';')) o.push_back(kv);
    TrainRanker(TestConfig(o), {.run_dir = run.path()});
  } else {
    TrainWorld(c.world, run.path(), c.overrides);
  }
  return {{"world", c.world},
          {"overrides", c.overrides},
          {"losses", Losses(run.path())},
          {"final_sha256", FinalSha(run.path())}};
}

// The processor: MKL picks its GEMM kernels and blocking by the CPU and its
// caches, not only by the instruction set ATen reports. Cloud VMs often
// name every model "Intel(R) Xeon(R) Processor", so the family, model,
// stepping and cache size count too (the first CPU's, as /proc/cpuinfo
// lists them).
std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string out;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.empty()) break;  // the end of the first CPU's entry
    for (const char* key : {"model name", "cpu family", "model\t", "stepping", "cache size"}) {
      if (line.rfind(key, 0) == 0) {
        out += fmt::format("{}{}", out.empty() ? "" : ", ", Trim(line.substr(line.find(':') + 1)));
      }
    }
  }
  return out.empty() ? "unknown" : out;
}

TEST(ReferenceRun, TrainerReproducesTheRecordedLossesAndCheckpoints) {
  const nlohmann::json machine{{"torch", TORCH_VERSION},
                               {"cpu_capability", at::get_cpu_capability()},
                               {"cpu", CpuModel()}};
  if (std::getenv("TOPSPIN_RECORD_REFERENCE") != nullptr) {
    nlohmann::json out{{"machine", machine}};
    for (const auto& c : kReferenceCases) out["cases"][c.name] = RunReferenceCase(c);
    WriteFileAtomic(ReferenceFile(), out.dump(2) + "\n");
    GTEST_SKIP() << "recorded " << ReferenceFile();
  }
  ASSERT_TRUE(fs::exists(ReferenceFile())) << ReferenceFile();
  const auto recorded = nlohmann::json::parse(ReadFile(ReferenceFile()));
  if (recorded.at("machine") != machine) {
    GTEST_SKIP() << "recorded with " << recorded.at("machine").dump() << ", this machine has "
                 << machine.dump() << ": bits differ between kernels";
  }
  for (const auto& c : kReferenceCases) {
    const auto& want = recorded.at("cases").at(c.name);
    const auto got = RunReferenceCase(c);
    EXPECT_EQ(got.at("losses"), want.at("losses")) << c.name;
    EXPECT_EQ(got.at("final_sha256"), want.at("final_sha256")) << c.name;
  }
}

// ---- the profiler names the bound of workloads built to have one ----
//
// Verdicts must not depend on how loaded the machine is. A slow loader and
// a slow exchange are injected (core/fault.h) at the component, inside what
// the trainer has to measure, so waiting on them dominates by construction;
// compute against memory is decided by the roofline of given peaks, from
// the FLOPs and bytes the trainer counts.

// 1 TFLOP/s against 20 GB/s: a balance of 50 FLOP per byte.
constexpr double kGivenTflops = 1.0, kGivenGbs = 20.0;

ProfileReport ProfileWorkload(const std::vector<std::string>& extra, StepProfile* out = nullptr,
                              int64_t steps = 40) {
  testing::TempDir run;
  std::vector<std::string> o = {fmt::format("train.steps={}", steps + 1), "train.eval_every=0",
                                "train.checkpoint_every=0", "data.valid="};
  o.insert(o.end(), extra.begin(), extra.end());
  RankerTrainOptions options{.run_dir = run.path(), .stop_after_steps = steps};
  options.peak_tflops = kGivenTflops;
  options.peak_gbs = kGivenGbs;
  const RankerTrainResult r = TrainRanker(TestConfig(o), options);
  EXPECT_TRUE(fs::exists(run / kProfileFile));
  if (out != nullptr) *out = r.profile;
  return Analyze(r.profile);
}

TEST(Profiler, NamesHostWhenTheLoaderIsSlow) {
  // 40 ms per batch on one loader thread against a tiny model's step.
  testing::ScopedEnv slow("TOPSPIN_FAULTS", "loader.batch=delay:40ms");
  StepProfile p;
  const auto host = ProfileWorkload(
      {"pipeline.threads=1", "model.bottom=4", "model.top=4", "model.embedding_dim=2"}, &p, 20);
  EXPECT_EQ(host.bound, "host") << host.evidence;
  EXPECT_NE(host.evidence.find("assemble stage"), std::string::npos) << host.evidence;
  // The loader's busy time holds every injected sleep.
  double busy = 0;
  for (const auto& stage : p.stages) busy += stage.busy_s;
  EXPECT_GE(busy, 0.04 * 20);
}

TEST(Profiler, NamesComputeAndMemoryByTheRoofline) {
  // Compute: wide layers; FLOPs per byte far above the balance.
  StepProfile wide;
  const auto compute = ProfileWorkload({"model.bottom=256", "model.top=1024,512"}, &wide, 15);
  EXPECT_EQ(compute.bound, "compute") << compute.evidence;
  EXPECT_GT(compute.mfu, 0);
  EXPECT_NE(compute.evidence.find("MFU"), std::string::npos) << compute.evidence;
  // Memory: wide embedding rows with two Adam moments each, a tiny MLP, and
  // lists so few that rows are rarely shared. Its steps take well under a
  // millisecond, so it runs 400 of them: in 40 the start-up (the global
  // shuffle's first batch waits for every row group) was a quarter of the
  // run on a loaded machine, and the verdict said host.
  const auto memory =
      ProfileWorkload({"model.embedding_dim=32", "optim.sparse=lazy_adam", "model.bottom=1",
                       "model.top=1", "pipeline.batch_size=2"},
                      nullptr, 400);
  EXPECT_EQ(memory.bound, "memory") << memory.evidence;
  EXPECT_NE(memory.evidence.find("below this machine's balance of 50.0 FLOP/byte"),
            std::string::npos)
      << memory.evidence;
  // The phases account for the step: claimed time never exceeds the wall
  // (no phase counted twice), and what none claims stays a small remainder
  // (a phase left untimed would be tens of percent).
  double claimed = 0;
  for (const auto& [name, secs] : wide.phase_s) claimed += name == "other" ? 0 : secs;
  EXPECT_LE(claimed, wide.wall_s * (1 + 1e-9));
  EXPECT_LT(wide.phase_s.at("other"), 0.10 * wide.wall_s);
}

TEST(Profiler, NamesCollectivesWhenTheExchangeIsSlow) {
  // Two ranks whose every collective wait takes 30 ms more.
  testing::ScopedEnv slow("TOPSPIN_FAULTS", "comm.wait=delay:30ms");
  testing::TempDir run;
  TrainWorld(2, run.path(), "model.bottom=8;model.top=8;dist.overlap=false");
  const StepProfile p = ReadProfile(run / kProfileFile);
  const ProfileReport r = Analyze(p);
  EXPECT_EQ(r.bound, "collectives") << r.evidence;
  EXPECT_GE(p.phase_s.at("sync"), 0.03 * double(p.steps)) << p.phase_s.at("sync");
}

TEST(RankerTrainer, ResumeChecksEveryTensorsDtypeAndShapeNotJustItsSize) {
  testing::TempDir run, forged_root;
  const std::vector<std::string> o = {"train.steps=10", "train.eval_every=0", "data.valid="};
  TrainRanker(TestConfig(o), {.run_dir = run.path()});
  const Checkpoint real = *CheckpointStore(run / "checkpoints").LoadLatest();
  const SafetensorsFile file = SafetensorsFile::Open(real.FilePath("model.safetensors"));
  // Rewrite one tensor with the same bytes under another shape, then under
  // another dtype of the same width; a proper checkpoint otherwise.
  const auto forge = [&](SafetensorsDType dtype, bool transpose) {
    std::vector<SafetensorsTensor> tensors;
    for (const TensorView& v : file.tensors()) {
      SafetensorsTensor t{v.name, v.dtype, v.shape, v.bytes};
      if (v.name == "table0") {
        if (transpose) std::swap(t.shape[0], t.shape[1]);
        t.dtype = dtype;
      }
      tensors.push_back(t);
    }
    CheckpointStore store(forged_root / (transpose ? "shape" : "dtype"));
    CheckpointWriter w = store.Begin(real.step);
    w.AddFileWith("model.safetensors", [&](const fs::path& p) { WriteSafetensors(p, tensors); });
    for (const auto& [name, entry] : real.files) {
      if (name != "model.safetensors") w.AddFile(name, ReadFile(real.FilePath(name)));
    }
    w.SetMeta(real.meta_json);
    return w.Commit().dir;
  };
  for (const auto& [dir, needle] :
       {std::pair{forge(SafetensorsDType::kF32, true), "the model needs F32 ["},
        std::pair{forge(SafetensorsDType::kI32, false), "the checkpoint holds I32 ["}}) {
    testing::TempDir resumed;
    try {
      TrainRanker(TestConfig(o), {.run_dir = resumed.path(), .resume = dir.string()});
      FAIL() << "a forged checkpoint loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kData);
      EXPECT_EQ(e.where().field, "table0") << e.Message();
      EXPECT_NE(e.Message().find(needle), std::string::npos) << e.Message();
    }
  }
}

TEST(RankerTrainer, AModelTooBigForMemoryIsAConfigErrorBeforeAnyAllocation) {
  for (const auto& [override_, field, part] :
       {std::tuple{"model.top=100000,100000", "model.top", "the dense layers ("},
        std::tuple{"pipeline.sparse=[\"brand: hash(1000000000000)\"]", "pipeline.sparse",
                   "the embedding table of \"brand\" (1000000000000 rows x 8"}}) {
    testing::TempDir run;
    try {
      TrainRanker(TestConfig({override_}), {.run_dir = run.path()});
      FAIL() << override_ << " trained";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.Message();
      EXPECT_EQ(e.where().field, field) << e.Message();
      EXPECT_NE(e.Message().find("more than the"), std::string::npos) << e.Message();
      EXPECT_NE(e.Message().find(part), std::string::npos) << e.Message();
    }
  }
}

// A ranking dataset of 20 lists of 4 documents with labels from `label`.
fs::path WriteLabelled(const fs::path& out, const std::function<double(int)>& label) {
  DatasetWriterOptions o;
  o.out = out;
  o.schema = {{"qid", DType::kInt64}, {"label", DType::kFloat32}, {"f1", DType::kFloat32}};
  o.label_column = "label";
  o.group_column = "qid";
  Table t = Table::Empty(o.schema);
  for (int i = 0; i < 80; ++i) {
    t.columns[0].AppendInt(i / 4);
    t.columns[1].AppendFloat(label(i));
    t.columns[2].AppendFloat(i % 7);
  }
  DatasetWriter w(o);
  w.Append(t);
  w.Commit();
  return out;
}

TEST(RankerTrainer, CheckpointsNameEachDenseParameterAndOldFlatOnesStillLoad) {
  testing::TempDir run, old_root;
  const Config config =
      TestConfig({"train.steps=10", "train.eval_every=0", "train.checkpoint_every=10"});
  TrainRanker(config, {.run_dir = run.path()});
  const Checkpoint real = *CheckpointStore(run / "checkpoints").LoadLatest();
  const SafetensorsFile file = SafetensorsFile::Open(real.FilePath("model.safetensors"));
  // Module names and shapes, as torch's named_parameters gives them.
  EXPECT_EQ(file.Find("dense.params"), nullptr);
  const TensorView* w = file.Find("dense.top.0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape.size(), 2u);
  EXPECT_EQ(w->shape[0], 32u);  // model.top 32
  ASSERT_NE(file.Find("dense.top.0.bias"), nullptr);
  // The same checkpoint in the flat layout of older runs evaluates the same.
  const torch::Tensor flat = DenseFromFile(file);
  std::vector<SafetensorsTensor> tensors = {
      {"dense.params", SafetensorsDType::kF32, {uint64_t(flat.numel())},
       std::span<const std::byte>(static_cast<const std::byte*>(flat.data_ptr()), flat.nbytes())}};
  for (const TensorView& v : file.tensors()) {
    if (!v.name.starts_with("dense.") || v.name.starts_with("dense.opt")) {
      tensors.push_back({v.name, v.dtype, v.shape, v.bytes});
    }
  }
  CheckpointStore store(old_root.path());
  CheckpointWriter cw = store.Begin(real.step);
  cw.AddFileWith("model.safetensors", [&](const fs::path& p) { WriteSafetensors(p, tensors); });
  for (const auto& [name, entry] : real.files) {
    if (name != "model.safetensors") cw.AddFile(name, ReadFile(real.FilePath(name)));
  }
  cw.SetMeta(real.meta_json);
  const fs::path old_dir = cw.Commit().dir;
  const auto now = EvaluateRanker(TestConfig(), real.dir);
  const auto before = EvaluateRanker(TestConfig(), old_dir);
  EXPECT_DOUBLE_EQ(before.metrics.at("ndcg@10"), now.metrics.at("ndcg@10"));
  EXPECT_DOUBLE_EQ(before.metrics.at("mrr"), now.metrics.at("mrr"));
}

TEST(RankerTrainer, LabelsOutsideTheLossRangeAreRefusedAtStart) {
  testing::TempDir tmp;
  const fs::path negative = WriteLabelled(tmp / "neg", [](int i) { return i % 4 == 0 ? -3 : 1; });
  const fs::path big = WriteLabelled(tmp / "big", [](int i) { return i % 4 == 0 ? 50 : 1; });
  const auto train = [&](const fs::path& data, const char* loss) {
    testing::TempDir run;
    TrainRanker(TestConfig({"data.train=" + data.string(), "data.valid=",
                            "pipeline.dense=[\"f1: standardize\"]", "pipeline.sparse=[]",
                            std::string("model.loss=") + loss, "train.steps=6",
                            "train.eval_every=0"}),
                {.run_dir = run.path()});
  };
  for (const auto& [data, loss] : {std::pair{negative, "softmax"}, std::pair{big, "lambdarank"},
                                   std::pair{negative, "bce"}, std::pair{big, "approx_ndcg"}}) {
    try {
      train(data, loss);
      FAIL() << loss << " trained on " << data;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kData) << e.Message();
      EXPECT_EQ(e.where().field, "label");
      EXPECT_NE(e.Message().find("the label column \"label\" ranges from"), std::string::npos)
          << e.Message();
      EXPECT_NE(e.Message().find(std::string("model.loss ") + loss), std::string::npos);
      // The first offending row: row 0 of the first shard.
      EXPECT_NE(e.Message().find("the first outside: shard-00000.tshard row 0 (dataset row 0) "
                                 "holds "),
                std::string::npos)
          << e.Message();
    }
  }
  // Pairwise and pointwise regression losses take any finite label.
  EXPECT_NO_THROW(train(negative, "ranknet"));
  EXPECT_NO_THROW(train(big, "mse"));
}

TEST(RankerTrainer, DivergenceStopsAfterMaxBadSteps) {
  testing::TempDir run;
  try {
    TrainRanker(TestConfig({"optim.name=sgd", "optim.lr=10", "optim.sparse_lr=100",
                            "optim.clip_norm=0", "model.loss=mse", "train.max_bad_steps=3"}),
                {.run_dir = run.path()});
    FAIL() << "no divergence error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_NE(e.Message().find("3 steps in a row"), std::string::npos) << e.Message();
  }
}

}  // namespace
}  // namespace topspin

namespace topspin {
namespace {

// Per-step training losses from a run's metrics.jsonl (train.log_every 1).
std::vector<double> StepLosses(const fs::path& run) {
  std::vector<double> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

// The same config on the GPU and on the CPU: the GPU's reductions run in
// another order, so the losses agree to 1e-3 relative, not bitwise.
TEST(CudaRanker, TrainsLikeTheCpuAndResumesOnEither) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible to this process";
  testing::TempDir cpu, gpu;
  const std::vector<std::string> common = {"train.steps=20", "train.log_every=1",
                                           "train.eval_every=0", "train.checkpoint_every=10"};
  auto with = [&](const char* device) {
    auto extra = common;
    extra.push_back(std::string("train.device=") + device);
    return TestConfig(extra);
  };
  const Config on_cpu = with("cpu"), on_gpu = with("cuda");
  TrainRanker(on_cpu, {.run_dir = cpu.path()});
  const RankerTrainResult r = TrainRanker(on_gpu, {.run_dir = gpu.path()});
  EXPECT_GT(r.phase_s.at("forward"), 0.0);  // timed with CUDA events
  EXPECT_TRUE(r.phase_s.contains("h2d"));
  const auto a = StepLosses(cpu.path()), b = StepLosses(gpu.path());
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 1e-3 * std::abs(a[i])) << "step " << i + 1;
  }
  // A GPU checkpoint resumes on the CPU (and the loader position counts
  // the batch copied ahead): steps 11-20 match the GPU's within tolerance.
  testing::TempDir resumed;
  fs::copy(gpu.path() / "checkpoints", resumed.path() / "checkpoints", fs::copy_options::recursive);
  fs::remove_all(resumed.path() / "checkpoints" / "step-20");
  TrainRanker(on_cpu, {.run_dir = resumed.path(), .resume = "auto"});
  const auto c = StepLosses(resumed.path());
  ASSERT_EQ(c.size(), 10u);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], b[10 + i], 1e-3 * std::abs(b[10 + i]));
}

}  // namespace
}  // namespace topspin
