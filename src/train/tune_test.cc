// The AutoTuner on the real step (topspin/train/tune.h): an out-of-memory
// trial is caught and the process goes on, a fixed global batch is kept,
// and a second run on the same machine and workload is a cache hit.
#include "topspin/train/tune.h"

#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/plan/memory_plan.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// A tiny GPT on ~40 KB of byte tokens, as a config file.
struct TinyGpt {
  testing::TempDir dir;
  fs::path config = dir / "gpt.yaml";
  TinyGpt() {
    WriteTextCorpus(dir / "corpus.txt", TextCorpusOptions{.max_bytes = 40000});
    Convert({dir / "corpus.txt"}, ImportOptions{.format = "text"},
            DatasetWriterOptions{.out = dir / "data", .row_group_rows = 64, .threads = 1},
            /*sort_groups=*/false, {});
    WriteFileAtomic(config, fmt::format(R"yaml(
run: {{seed: 3}}
data: {{train: "{}"}}
pipeline: {{threads: 1, prefetch: 2, batch_size: 8, shuffle: global}}
model:
  kind: gpt
  gpt: {{context: 32, layers: 2, d_model: 64, heads: 2}}
optim: {{lr: 0.003, warmup_steps: 0}}
train: {{steps: 10, torch_threads: 1}}
)yaml",
                                        (dir / "data").string()));
  }
};

const TinyGpt& Shared() {
  static const TinyGpt gpt;
  return gpt;
}

TuneRequest Request(std::vector<std::string> overrides = {}) {
  TuneRequest r;
  r.config = Shared().config;
  r.overrides = std::move(overrides);
  r.budget_s = 3;
  r.window_s = 0.05;
  r.memory_limit = "0.5";
  return r;
}

uint64_t PeakAt(StepTrials& trials, int64_t batch) {
  const MemoryProbe p = trials.Probe(batch, trials.defaults());
  EXPECT_FALSE(p.oom) << p.error;
  return p.peak_bytes;
}

TEST(Tune, AnOutOfMemoryTrialIsCaughtAndTheProcessGoesOn) {
  uint64_t peak8 = 0;
  {
    StepTrials roomy(Request());
    peak8 = PeakAt(roomy, 8);
    EXPECT_GT(PeakAt(roomy, 64), peak8);  // activations grow with the batch
  }
  TuneRequest r = Request();
  r.memory_limit = fmt::format("{}", peak8 * 2);  // bytes: room for 8, not for 256
  StepTrials trials(r);
  EXPECT_EQ(trials.limit_bytes(), peak8 * 2);
  const MemoryProbe big = trials.Probe(256, trials.defaults());
  EXPECT_TRUE(big.oom);
  EXPECT_NE(big.error.find("host memory limit"), std::string::npos) << big.error;
  // Healthy afterwards: the same batch measures the same peak, and trains.
  EXPECT_NEAR(double(PeakAt(trials, 8)), double(peak8), 0.05 * double(peak8));
  const TrialOutcome o = trials.Run(trials.defaults(), 2);
  EXPECT_FALSE(o.oom) << o.error;
  ASSERT_EQ(o.windows.size(), 2u);
  EXPECT_GT(o.windows[0], 0);
}

TEST(Tune, AFixedGlobalBatchIsSplitNotChanged) {
  uint64_t peak2 = 0, peak4 = 0, peak8 = 0;
  {
    StepTrials roomy(Request());
    peak2 = PeakAt(roomy, 2);
    peak4 = PeakAt(roomy, 4);
    peak8 = PeakAt(roomy, 8);
  }
  ASSERT_LT(peak2, peak4);
  ASSERT_LT(peak4, peak8);
  testing::TempDir cache;
  TuneRequest r = Request();
  r.cache_dir = cache.path();
  // 4 fits under (1 - margin) of the limit, 8 does not.
  r.memory_limit = fmt::format("{}", uint64_t(double(peak4 + peak8) / 2 / 0.9));
  const TuneReport report = Tune(r);
  const auto has = [&](const std::string& set) {
    return std::find(report.sets.begin(), report.sets.end(), set) != report.sets.end();
  };
  EXPECT_TRUE(has("pipeline.batch_size=4")) << fmt::format("{}", fmt::join(report.sets, " "));
  EXPECT_TRUE(has("optim.grad_accum=2"));  // 4 x 2 = the configured 8 x 1
  EXPECT_NE(report.yaml.find("keeps the global batch 8"), std::string::npos);
}

TEST(Tune, WritesTheConfigAndLogAndTheSecondRunIsACacheHit) {
  testing::TempDir cache, out;
  TuneRequest r = Request();
  r.cache_dir = cache.path();
  r.log = out / "trials.jsonl";
  const TuneReport first = Tune(r);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_GT(first.trials, 2);
  EXPECT_EQ(first.unit, "tokens");
  EXPECT_GT(first.tuned_rate, 0);
  // The tuned config loads, and says why for each choice.
  const Config tuned = Config::Parse(first.yaml, "tuned.yaml", {}, TopspinSchema());
  EXPECT_EQ(tuned.GetString("model.kind"), "gpt");
  for (const char* key : {"threads:", "prefetch:", "torch_threads:", "batch_size:"}) {
    const size_t at = first.yaml.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    const std::string line = first.yaml.substr(at, first.yaml.find('\n', at) - at);
    EXPECT_NE(line.find("# tuned"), std::string::npos) << line;
  }
  // Every trial is a JSON line with its measurements.
  std::ifstream log(r.log);
  int lines = 0;
  for (std::string line; std::getline(log, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("knobs") && j.contains("windows") && j.contains("peak_bytes"));
  }
  EXPECT_EQ(lines, first.trials);

  const TuneReport second = Tune(r);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.sets, first.sets);
  EXPECT_EQ(second.yaml, first.yaml);
  EXPECT_LT(second.seconds, 1.0);

  // Another workload (a wider model) misses; the same one with another
  // train.steps or run name hits.
  TuneRequest other = r;
  other.cache_only = true;
  other.overrides = {"model.gpt.d_model=96"};
  EXPECT_THROW(Tune(other), Error);
  other.overrides = {"train.steps=500", "run.name=again"};
  EXPECT_TRUE(Tune(other).cache_hit);
  EXPECT_NE(WorkloadHash(Config::Load(r.config, {"model.gpt.d_model=96"}, TopspinSchema())),
            WorkloadHash(Config::Load(r.config, {}, TopspinSchema())));
}

// `topspin plan memory` against the exact peak the counting allocator
// measures for the real step (parameters, gradients, AdamW state,
// activations, the loss), within 10% on shapes where each part matters.
TEST(Tune, ThePlannedMemoryIsWithinTenPercentOfTheMeasuredPeak) {
  struct Case {
    std::vector<std::string> sets;
    int64_t batch;
  };
  const std::vector<Case> cases = {
      {{"model.gpt.context=64", "model.gpt.d_model=128", "model.gpt.heads=4"}, 16},
      {{"model.gpt.context=64", "model.gpt.d_model=128", "model.gpt.heads=4"}, 64},
      {{"model.gpt.context=64", "model.gpt.d_model=64", "model.gpt.layers=4"}, 32},
      {{"model.gpt.context=64", "model.gpt.d_model=128", "model.gpt.heads=4",
        "model.gpt.attention=composed"}, 16},
      {{"model.gpt.context=64", "model.gpt.d_model=128", "model.gpt.heads=4",
        "train.precision=bf16"}, 32},
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = c.sets;
    sets.push_back(fmt::format("pipeline.batch_size={}", c.batch));
    StepTrials trials(Request(sets));
    const double measured = double(PeakAt(trials, c.batch));
    const GptMemory plan = EstimateGptMemory(
        GptMemoryInputsFrom(Settings::From(Config::Load(Shared().config, sets, TopspinSchema()))));
    const std::string what = fmt::format("{} batch {}: planned {} (state {}, activations {}, "
                                         "loss {}), measured {}",
                                         fmt::join(c.sets, " "), c.batch, plan.total_bytes,
                                         plan.param_bytes + plan.grad_bytes + plan.optimizer_bytes,
                                         plan.activation_bytes, plan.head_bytes, measured);
    std::printf("%s\n", what.c_str());
    EXPECT_NEAR(double(plan.total_bytes) / measured, 1.0, 0.10) << what;
  }
}

TEST(Tune, MemoryLimitsParseOrSayWhatIsWrong) {
  EXPECT_EQ(ParseMemoryLimit("0.5", 1000), 500u);
  EXPECT_EQ(ParseMemoryLimit("2GiB", 0), uint64_t{2} << 30);
  EXPECT_EQ(ParseMemoryLimit("512MiB", 0), uint64_t{512} << 20);
  EXPECT_EQ(ParseMemoryLimit("1GiB", 0), uint64_t{1} << 30);
  EXPECT_EQ(ParseMemoryLimit("0.5GiB", 0), uint64_t{1} << 29);
  EXPECT_EQ(ParseMemoryLimit("3000000000", 0), 3000000000u);
  for (const char* bad : {"0", "1.5", "-1", "lots", "2 GiB", "5XB", "0GiB", "-2GiB"}) {
    try {
      ParseMemoryLimit(bad, 1000);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--memory-limit"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace topspin
