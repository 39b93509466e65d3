// Generation and evaluation of trained GPTs (topspin/train/gpt_inference.h).
#include "topspin/train/gpt_inference.h"

#include <cmath>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/importer.h"
#include "topspin/train/trainer.h"
#include "train/gpt_parts.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSentence = "the quick brown fox jumps over the lazy dog. ";

// A GPT trained until it has memorised kSentence, repeated (byte tokens).
struct Memorised {
  testing::TempDir dir;
  fs::path run = dir / "run";
  Config config;
  TrainResult result;

  Memorised() : config(Make(dir.path())) { result = Train(config, {.run_dir = run}); }

  static Config Make(const fs::path& dir) {
    std::string text;
    for (int i = 0; i < 300; ++i) text += kSentence;
    WriteFileAtomic(dir / "corpus.txt", text);
    Convert({dir / "corpus.txt"}, ImportOptions{.format = "text"},
            DatasetWriterOptions{.out = dir / "data", .row_group_rows = 256, .threads = 1},
            /*sort_groups=*/false, {});
    const std::string yaml = fmt::format(R"yaml(
run: {{seed: 5}}
data: {{train: "{0}", valid: "{0}"}}
pipeline: {{threads: 1, batch_size: 16, shuffle: global}}
model:
  kind: gpt
  gpt: {{context: 32, layers: 2, d_model: 64, heads: 2}}
optim: {{lr: 0.01, warmup_steps: 10, schedule: constant, weight_decay: 0.0}}
train: {{steps: 200, log_every: 50, eval_every: 200, eval_batches: 0, checkpoint_every: 200,
         torch_threads: 1}}
)yaml",
                                         (dir / "data").string());
    return Config::Parse(yaml, "memorise.yaml", {}, TopspinSchema());
  }
};

const Memorised& Shared() {
  static const Memorised m;
  return m;
}

GenerateOptions Greedy(std::string prompt, int64_t tokens) {
  return {.prompt = std::move(prompt), .max_new_tokens = tokens, .sampling = {.temperature = 0}};
}

TEST(GptGenerate, AMemorisedCorpusIsRecitedAlsoPastTheContext) {
  const Memorised& m = Shared();
  ASSERT_LT(m.result.valid.at("loss"), 0.1) << "the corpus is memorised";
  // 120 new bytes: the window of 32 slides about four times.
  std::string streamed;
  const GenerateResult r = GenerateText(m.config, m.run, Greedy("the quick ", 120),
                                        [&](std::string_view piece) { streamed += piece; });
  EXPECT_EQ(r.new_tokens, 120);
  EXPECT_EQ(r.prompt_tokens, 10);
  EXPECT_EQ(r.tokenizer, "bytes");  // the checkpoint's own
  EXPECT_EQ(r.step, 200);
  std::string expected;
  while (expected.size() < 130) expected += kSentence;
  EXPECT_EQ("the quick " + r.text, expected.substr(0, 130));
  EXPECT_EQ(streamed, r.text);
  // top_k 1 is greedy whatever the temperature.
  GenerateOptions k1 = Greedy("the quick ", 40);
  k1.sampling = {.temperature = 5, .top_k = 1};
  EXPECT_EQ(GenerateText(m.config, m.run, k1).text, r.text.substr(0, 40));
}

TEST(GptGenerate, TheSameSeedGivesTheSameText) {
  const Memorised& m = Shared();
  GenerateOptions o{.prompt = "the ", .max_new_tokens = 64, .sampling = {.temperature = 4.0}};
  o.seed = 11;
  const std::string a = GenerateText(m.config, m.run, o).text;
  EXPECT_EQ(GenerateText(m.config, m.run, o).text, a);
  o.seed = 12;
  EXPECT_NE(GenerateText(m.config, m.run, o).text, a);  // a hot temperature: varied text
  // An empty prompt starts a new document; the byte tokenizer's ids are
  // all text, so nothing is dropped.
  o.prompt = "";
  EXPECT_EQ(GenerateText(m.config, m.run, o).prompt_tokens, 1);
}

TEST(GptGenerate, BadOptionsAndTokenizersAreRefusedByName) {
  const Memorised& m = Shared();
  GenerateOptions o = Greedy("x", 4);
  o.sampling.top_p = 0;
  try {
    GenerateText(m.config, m.run, o);
    FAIL() << "top_p 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "--top-p");
  }
  // A checkpoint without tokenizer files has none.
  EXPECT_EQ(CheckpointTokenizer(Checkpoint{}), nullptr);
  o = Greedy("x", 4);
  o.tokenizer = "bytez";
  EXPECT_THROW(GenerateText(m.config, m.run, o), Error);
  // A ranker run is not a GPT.
  const Config ranker = Config::Defaults({}, TopspinSchema());
  try {
    GenerateText(ranker, m.run, Greedy("x", 4));
    FAIL() << "a ranker config";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "model.kind");
  }
}

TEST(GptEval, ScoresTheBestCheckpointAsTrainingDid) {
  const Memorised& m = Shared();
  const GptEvalResult r = EvaluateGpt(m.config, m.run);
  EXPECT_EQ(r.step, 200);
  // Every window of data.valid, as the run's last evaluation (eval_batches 0).
  EXPECT_DOUBLE_EQ(r.loss, m.result.valid.at("loss"));
  EXPECT_NEAR(r.perplexity, std::exp(r.loss), 1e-12);
  EXPECT_GT(r.tokens, 10000);
}

}  // namespace
}  // namespace topspin
