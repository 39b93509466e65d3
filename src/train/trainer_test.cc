// The trainer core with a second workload: the GPT (model.kind gpt) trains,
// evaluates, checkpoints and resumes through the same loop as the ranker,
// and ZeRO-3 (dist.zero 3, from the config) trains the model ZeRO-0 trains.
#include "topspin/train/trainer.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/test_util.h"
#include "topspin/plan/transformer_cost.h"
#include "train/task.h"
#include "train/train_test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/data/safetensors.h"
#include "topspin/dist/launch_env.h"
#include "topspin/dist/spawn.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using testing::FinalSha;
using testing::Losses;

// A text dataset of ~60 KB of byte tokens (the licence texts every Debian
// machine has), for training and validation.
struct TextData {
  testing::TempDir dir;
  fs::path data = dir / "data";
  TextData() {
    if (const char* parent = std::getenv("TOPSPIN_TEST_GPT_DATA"); parent != nullptr) {
      data = fs::path(parent) / "data";
      return;
    }
    WriteTextCorpus(dir / "corpus.txt", TextCorpusOptions{.max_bytes = 60000});
    Convert({dir / "corpus.txt"}, ImportOptions{.format = "text"},
            DatasetWriterOptions{.out = data, .row_group_rows = 64, .threads = 1},
            /*sort_groups=*/false, {});
  }
};

const TextData& SharedText() {
  static const TextData data;
  return data;
}

Config GptConfig(const std::vector<std::string>& extra = {}) {
  const std::string yaml = fmt::format(R"yaml(
run: {{seed: 3}}
data: {{train: "{0}", valid: "{0}"}}
pipeline: {{threads: 1, batch_size: 4, shuffle: global}}
model:
  kind: gpt
  gpt: {{context: 16, layers: 2, d_model: 32, heads: 2}}
optim: {{lr: 0.003, warmup_steps: 2}}
train: {{steps: 8, log_every: 1, eval_every: 4, eval_batches: 4, checkpoint_every: 4,
         torch_threads: 1}}
)yaml",
                                       SharedText().data.string());
  return Config::Parse(yaml, "gpt.yaml", extra, TopspinSchema());
}

TEST(GptTrainer, TrainsEvaluatesKeepsTheBestAndResumesBitwise) {
  testing::TempDir run, resumed;
  const TrainResult r = Train(GptConfig(), {.run_dir = run.path()});
  EXPECT_EQ(r.step, 8);
  EXPECT_EQ(r.unit, "tokens");
  // 8 steps of 4 windows of 16 predicted tokens.
  EXPECT_GT(r.items_per_s, 0);
  ASSERT_TRUE(r.valid.contains("loss"));
  EXPECT_TRUE(std::isfinite(r.valid.at("loss")));
  EXPECT_NEAR(r.valid.at("perplexity"), std::exp(r.valid.at("loss")), 1e-9);
  // The best checkpoint is judged by the lowest validation loss (auto).
  EXPECT_EQ(r.best_metric, "loss");
  const auto best = nlohmann::json::parse(ReadFile(run / "best.json"));
  EXPECT_EQ(best.at("mode"), "min");
  EXPECT_EQ(best.at("metric"), "valid/loss");
  // metrics.jsonl counts tokens; the loss starts near ln(257) and falls.
  std::ifstream in(run / "metrics.jsonl");
  const auto first = nlohmann::json::parse([&] {
    std::string line;
    std::getline(in, line);
    return line;
  }());
  EXPECT_TRUE(first.contains("tokens_per_s"));
  const auto losses = Losses(run.path());
  ASSERT_EQ(losses.size(), 8u);
  EXPECT_NEAR(losses.front(), std::log(257.0), 0.5);
  EXPECT_LT(losses.back(), losses.front());
  // Killed after step 5, resumed from its step-4 checkpoint: the same bits.
  Train(GptConfig(), {.run_dir = resumed.path(), .stop_after_steps = 5});
  const TrainResult more = Train(GptConfig(), {.run_dir = resumed.path(), .resume = "auto"});
  EXPECT_EQ(more.resumed_from, 4);
  EXPECT_EQ(FinalSha(run.path()), FinalSha(resumed.path()));
}

TEST(GptTrainer, ConfigCheckNamesWhatIsWrong) {
  // Token ids of the byte tokenizer (letters are 97 and up) do not fit a
  // smaller vocabulary: config check reads the first batch.
  try {
    CheckTrainConfig(GptConfig({"model.gpt.vocab=100"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "model.gpt.vocab");
    EXPECT_NE(std::string(e.what()).find("holds token id"), std::string::npos) << e.what();
  }
  // Ranking metrics are not the GPT's.
  try {
    CheckTrainConfig(GptConfig({"train.best.metric=ndcg@10"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "train.best.metric");
  }
  // A key the GPT does not read is refused, with the line that set it, and
  // Train refuses it the same way before it builds anything.
  const Config ranker_key = Config::Parse("model:\n  kind: gpt\n  loss: ranknet\n", "g.yaml",
                                          {}, TopspinSchema());
  for (const auto& run : std::vector<std::function<void()>>{
           [&] { CheckTrainConfig(ranker_key); },
           [&] { Train(ranker_key, {.run_dir = testing::TempDir().path()}); }}) {
    try {
      run();
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, "model.loss");
      EXPECT_EQ(e.where().file, "g.yaml");
      EXPECT_EQ(e.where().line, 3);
      EXPECT_NE(e.Message().find("model.kind gpt does not read it"), std::string::npos)
          << e.Message();
    }
  }
  try {
    CheckTrainConfig(GptConfig({"pipeline.dense=[\"a: log1p\"]"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "pipeline.dense");
    EXPECT_EQ(e.where().file, "--set pipeline.dense=[\"a: log1p\"]");
  }
  // A padded vocabulary adds rows, not ids: 257 -> 320 rows of the
  // embedding (and the tied head).
  const Config padded = GptConfig({"model.gpt.vocab_multiple=64", "train.steps=3", "data.valid="});
  const GptShape shape = GptShapeFromConfig(Settings::From(padded).model.gpt);
  EXPECT_EQ(shape.vocab, 320);
  EXPECT_EQ(Train(padded, {.run_dir = testing::TempDir().path()}).dense_params,
            ParameterCount(shape));
  // ZeRO-3 is for several ranks; one process trains as ZeRO-0.
  EXPECT_EQ(Train(GptConfig({"dist.zero=3", "train.steps=3", "data.valid="}),
                  {.run_dir = testing::TempDir().path()})
                .step,
            3);
  const auto lines = CheckTrainConfig(GptConfig());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("GPT of"), std::string::npos) << lines[0];
}

// ---- ZeRO-3 from the config: this binary runs GptRank.Train as ranks ----

const char* GptRankDir() { return std::getenv("TOPSPIN_TEST_GPT_DIR"); }

TEST(GptRank, Train) {
  if (GptRankDir() == nullptr) GTEST_SKIP() << "worker: runs under GptTrainer.Zero*";
  TrainOptions o{.run_dir = GptRankDir()};
  o.launch = DetectLaunchEnv();
  o.rendezvous.file_store = fs::path(GptRankDir()) / "store";
  o.rendezvous.timeout = std::chrono::seconds(60);
  std::vector<std::string> extra = {"data.valid=", "train.checkpoint_every=0"};
  if (const char* set = std::getenv("TOPSPIN_TEST_SET"); set != nullptr) {
    for (const auto& kv : Split(set, ';')) {
      if (!kv.empty()) extra.push_back(kv);
    }
  }
  const TrainResult r = Train(GptConfig(extra), o);
  WriteFileAtomic(fs::path(GptRankDir()) / fmt::format("memory.{}", o.launch.rank),
                  fmt::format("{} {} {} {}", r.dense_params, r.dense_param_bytes,
                              r.dense_grad_bytes, r.dense_optimizer_bytes));
}

void TrainGptWorld(int world, const fs::path& dir, const std::string& extra) {
  SpawnOptions o;
  o.argv = {"/proc/self/exe", "--gtest_filter=GptRank.Train"};
  o.nproc = world;
  o.grace_s = 5;
  o.extra_env = {{"TOPSPIN_TEST_GPT_DIR", dir.string()},
                 {"TOPSPIN_TEST_SET", extra},
                 {"TOPSPIN_TEST_GPT_DATA", SharedText().dir.path().string()}};
  const SpawnResult r = SpawnAndSupervise(o);
  ASSERT_EQ(r.exit_code, 0) << r.cause;
}

torch::Tensor DenseParams(const fs::path& run) {
  const auto c = CheckpointStore(run / "checkpoints").LoadLatest();
  EXPECT_TRUE(c.has_value());
  if (!c) return {};
  const SafetensorsFile file = SafetensorsFile::Open(c->FilePath("model.safetensors"));
  std::vector<torch::Tensor> parts;
  for (const auto& t : file.tensors()) {
    if (!t.name.starts_with("dense.")) continue;  // parameters and optimizer state
    parts.push_back(torch::from_blob(const_cast<std::byte*>(t.bytes.data()),
                                     {int64_t(t.bytes.size() / 4)}, torch::kFloat)
                        .clone());
  }
  return torch::cat(parts);
}

TEST(GptTrainer, Zero3FromTheConfigTrainsTheModelZero0TrainsAndShardsEverything) {
  testing::TempDir one, plain, zero1, zero2, zero3;
  // With evaluations (every rank takes part under ZeRO-3: its forward
  // gathers the units).
  const std::string valid = "data.valid=" + SharedText().data.string();
  Train(GptConfig({valid}), {.run_dir = one.path()});
  TrainGptWorld(2, plain.path(), valid);
  TrainGptWorld(2, zero1.path(), valid + ";dist.zero=1");
  TrainGptWorld(2, zero2.path(), valid + ";dist.zero=2");
  TrainGptWorld(2, zero3.path(), valid + ";dist.zero=3;dist.wrap_blocks=1");
  // One process and two at every ZeRO stage: the same losses, to the float
  // rounding of summing the gradient in another order.
  const auto l1 = Losses(one.path());
  for (const fs::path& run : {plain.path(), zero1.path(), zero2.path(), zero3.path()}) {
    const auto l2 = Losses(run);
    ASSERT_EQ(l2.size(), l1.size()) << run;
    for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l2[i], l1[i], 1e-5 * l1[i]) << run << " " << i;
  }
  // Parameters and optimizer state, gathered whole into the checkpoint,
  // under the same names: equal up to float rounding of the reductions.
  const auto a = DenseParams(plain.path()), b = DenseParams(zero3.path());
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5);
  const auto la = Losses(plain.path()), lb = Losses(zero3.path());
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(lb[i], la[i], 1e-5 * la[i]) << i;
  // Per rank: parameters, gradients and AdamW state each about 1/2 of ZeRO-0's.
  for (int r = 0; r < 2; ++r) {
    int64_t p = 0, params = 0, grads = 0, optimizer = 0;
    std::istringstream(ReadFile(zero3 / fmt::format("memory.{}", r))) >> p >> params >> grads >>
        optimizer;
    EXPECT_NEAR(double(params), 4.0 * double(p) / 2, 0.05 * 4.0 * double(p) / 2);
    EXPECT_NEAR(double(grads), 4.0 * double(p) / 2, 0.05 * 4.0 * double(p) / 2);
    EXPECT_NEAR(double(optimizer), 8.0 * double(p) / 2, 0.05 * 8.0 * double(p) / 2);
  }
  // The sharded run's checkpoint resumes in one process (another world size
  // and stage) and trains on.
  EXPECT_TRUE(fs::exists(zero3 / "best.json"));
  const TrainResult more = Train(GptConfig({"train.steps=10"}),
                                 {.run_dir = zero3.path(), .resume = "auto", .extend = true});
  EXPECT_EQ(more.resumed_from, 8);
  EXPECT_EQ(more.step, 10);
}

}  // namespace
}  // namespace topspin
