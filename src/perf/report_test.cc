#include "topspin/perf/report.h"

#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

// A training record as the trainer writes it: six phases, four stages.
std::string TrainLine(int64_t step, double loss) {
  return fmt::format(
      R"({{"step":{},"time":{},"docs_per_s":{},"loader_busy/assemble":0.05,)"
      R"("loader_busy/decode":0.2,"loader_busy/read":0.1,"loader_busy/transform":0.6,)"
      R"("loss":{},"lr":0.001,"phase_ms/backward":6.0,"phase_ms/checkpoint":0.0,)"
      R"("phase_ms/data_wait":0.5,"phase_ms/eval":0.0,"phase_ms/forward":4.0,"phase_ms/log":0.01,)"
      R"("phase_ms/optimizer":1.5,"phase_ms/other":0.2,"phase_ms/sync":0.0,"skipped_steps":0}})"
      "\n",
      step, 1767225600 + step, 1000 * step, loss);
}

std::string EvalLine(int64_t step, double ndcg) {
  return fmt::format(R"({{"step":{},"time":{},"valid/map@10":{},"valid/mrr":{},"valid/ndcg@1":{},)"
                     R"("valid/ndcg@10":{},"valid/ndcg@3":{},"valid/ndcg@5":{}}})"
                     "\n",
                     step, 1767225600 + step, ndcg, ndcg, ndcg, ndcg, ndcg, ndcg);
}

std::vector<int64_t> Steps(const std::vector<MetricsRecord>& records) {
  std::vector<int64_t> steps;
  for (const auto& r : records) steps.push_back(r.step);
  return steps;
}

TEST(MetricsLog, ALaterRecordForAStepWins) {
  // A run logs to step 30 and is killed; the resumed run (from a checkpoint
  // at step 10) appends steps 20 to 40 again.
  const std::string text = TrainLine(10, 1.0) + TrainLine(20, 0.9) + EvalLine(20, 0.5) +
                           TrainLine(30, 0.8) + TrainLine(20, 0.7) + EvalLine(20, 0.6) +
                           TrainLine(30, 0.6) + TrainLine(40, 0.5);
  const MetricsLog log = ParseMetricsLog(text, "m.jsonl");
  EXPECT_EQ(Steps(log.train), (std::vector<int64_t>{10, 20, 30, 40}));
  EXPECT_EQ(log.train[1].values.at("loss"), 0.7);
  EXPECT_EQ(log.train[2].values.at("loss"), 0.6);
  // An evaluation at a step does not replace the training record at it.
  EXPECT_EQ(Steps(log.eval), (std::vector<int64_t>{20}));
  EXPECT_EQ(log.eval[0].values.at("valid/ndcg@10"), 0.6);
  EXPECT_EQ(log.replaced, 3);
  EXPECT_TRUE(log.warnings.empty());
  EXPECT_EQ(log.train[0].time, 1767225610);
}

TEST(MetricsLog, SkipsATruncatedLastLineWithAWarning) {
  const std::string text = TrainLine(10, 1.0) + TrainLine(20, 0.9) + R"({"step":30,"loss":0.)";
  const MetricsLog log = ParseMetricsLog(text, "run/metrics.jsonl");
  EXPECT_EQ(Steps(log.train), (std::vector<int64_t>{10, 20}));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find("run/metrics.jsonl:3: skipped a line cut short"),
            std::string::npos)
      << log.warnings[0];
}

TEST(MetricsLog, SkipsALineCutShortBeforeAResume) {
  // JsonlWriter starts a new line after a torn tail, so it ends up inside.
  const std::string text =
      TrainLine(10, 1.0) + R"({"step":20,"lo)" + "\n" + TrainLine(20, 0.9) + TrainLine(30, 0.8);
  const MetricsLog log = ParseMetricsLog(text, "m.jsonl");
  EXPECT_EQ(Steps(log.train), (std::vector<int64_t>{10, 20, 30}));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_NE(log.warnings[0].find("m.jsonl:2:"), std::string::npos);
  EXPECT_NE(log.warnings[0].find("then resumed"), std::string::npos);
}

// The Error ParseMetricsLog throws for `text`.
Error ParseError(const std::string& text) {
  try {
    ParseMetricsLog(text, "run/metrics.jsonl");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << text;
  return InternalError("none");
}

TEST(MetricsLog, AMalformedLineIsAnErrorNamingFileAndLine) {
  const Error bad =
      ParseError(TrainLine(10, 1.0) + R"({"step": 20, "loss": oops})" + "\n" + TrainLine(30, 0.8));
  EXPECT_EQ(bad.kind(), ErrorKind::kData);
  EXPECT_EQ(bad.where().line, 2);
  EXPECT_NE(bad.Message().find("run/metrics.jsonl:2:"), std::string::npos) << bad.Message();
  EXPECT_NE(bad.Message().find("malformed JSON"), std::string::npos) << bad.Message();
  EXPECT_NE(bad.Message().find("hint:"), std::string::npos) << bad.Message();
  // A complete last line (it has its newline) is not a torn one.
  EXPECT_EQ(ParseError(TrainLine(10, 1.0) + "garbage\n").where().line, 2);
  // Well-formed JSON that is not a record.
  const Error no_step = ParseError(TrainLine(10, 1.0) + "\n" + R"({"loss": 1})" + "\n");
  EXPECT_EQ(no_step.where().line, 3);
  EXPECT_NE(no_step.Message().find("no integer \"step\""), std::string::npos);
  EXPECT_EQ(ParseError("[1, 2]\n").where().line, 1);
}

TEST(MetricsLog, NonFiniteValuesComeBackAsSuch) {
  const MetricsLog log = ParseMetricsLog(
      R"({"step":1,"time":5,"loss":"nan","lr":"inf","note":"text","flag":true})", "m.jsonl");
  ASSERT_EQ(log.train.size(), 1u);
  EXPECT_TRUE(std::isnan(log.train[0].values.at("loss")));
  EXPECT_EQ(log.train[0].values.at("lr"), INFINITY);
  EXPECT_EQ(log.train[0].values.count("note"), 0u);
  EXPECT_EQ(log.train[0].values.count("flag"), 0u);
}

struct PlotCounts {
  int series = -1;
  int points = -1;
};

// data-series and data-points of the plot `name` in `html`.
PlotCounts CountsOf(const std::string& html, const std::string& name) {
  const std::regex svg("<svg[^>]*data-plot=\"" + name +
                       "\" data-series=\"([0-9]+)\" data-points=\"([0-9]+)\"");
  std::smatch m;
  if (!std::regex_search(html, m, svg)) return {};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

StepProfile ComputeBoundProfile() {
  StepProfile p;
  p.steps = 100;
  p.wall_s = 1.0;
  p.phase_s = {{"data_wait", 0.01},
               {"forward", 0.4},
               {"backward", 0.5},
               {"optimizer", 0.08},
               {"other", 0.01}};
  p.items = 100000;
  p.flops_per_item = 1e6;
  p.peak_flops = 0.4e12;
  p.peak_source = "measured matmul";
  p.loader_threads = 2;
  return p;
}

class RunDirReport : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string metrics;
    for (int step = 10; step <= 50; step += 10) {
      metrics += TrainLine(step, 1.0 / step);
      if (step % 20 == 0) metrics += EvalLine(step, 0.3 + step / 100.0);
    }
    WriteFileAtomic(dir_ / kMetricsFile, metrics);
    WriteFileAtomic(dir_ / "config.yaml", "run:\n  name: <script>alert(\"x\")</script> & 'y'\n");
    const StepProfile p = ComputeBoundProfile();
    WriteFileAtomic(dir_ / kProfileFile, ProfileJson(p, Analyze(p)));
  }

  std::string Html() { return RenderReportHtml(LoadRunReport(dir_.path())); }

  testing::TempDir dir_;
};

TEST_F(RunDirReport, EveryPlotCarriesItsData) {
  const std::string html = Html();
  // 5 training records; evaluations at 20 and 40 with six metrics each.
  EXPECT_EQ(CountsOf(html, "loss").series, 1);
  EXPECT_EQ(CountsOf(html, "loss").points, 5);
  // One chart per validation metric, each on its own scale.
  for (const char* metric : {"ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map@10", "mrr"}) {
    EXPECT_EQ(CountsOf(html, std::string("validation-") + metric).series, 1) << metric;
    EXPECT_EQ(CountsOf(html, std::string("validation-") + metric).points, 2) << metric;
  }
  EXPECT_EQ(CountsOf(html, "throughput").points, 5);
  // Phases that were 0 all run (sync, eval, checkpoint) draw nothing.
  EXPECT_EQ(CountsOf(html, "phases").series, 6);
  EXPECT_EQ(CountsOf(html, "phases").points, 30);
  EXPECT_EQ(CountsOf(html, "loader").series, 4);
  EXPECT_EQ(CountsOf(html, "loader").points, 20);
  // Legends name the series; axes have labels.
  for (const char* name : {"ndcg@10", "map@10", "mrr", "data_wait", "backward", "transform"}) {
    EXPECT_NE(html.find(fmt::format(">{}</text>", name)), std::string::npos) << name;
  }
  EXPECT_NE(html.find(">ms per step</text>"), std::string::npos);
}

TEST_F(RunDirReport, ResumesAreMarkedOnThePlots) {
  std::string metrics = ReadFile(dir_ / kMetricsFile);
  // A run resumed from step 30: its first record says so.
  metrics += R"({"step":60,"time":1767225700,"loss":0.01,"resumed_from":30})"
             "\n";
  WriteFileAtomic(dir_ / kMetricsFile, metrics);
  const std::string html = Html();
  EXPECT_NE(html.find("<title>resumed at 30</title>"), std::string::npos);
  // On the loss, throughput and each validation chart.
  size_t markers = 0;
  for (size_t at = html.find("class=\"marker\""); at != std::string::npos;
       at = html.find("class=\"marker\"", at + 1)) {
    ++markers;
  }
  EXPECT_EQ(markers, 2u + 6u);
}

TEST_F(RunDirReport, TheCheckpointsOnDiskAreListedWithTheBest) {
  // Checkpoints 20 and 40 were evaluated (0.5, 0.7); 50 is the newest;
  // 10 is pruned; 60 is incomplete.
  for (const char* dir : {"step-20", "step-40", "step-50", "step-60.incomplete"}) {
    std::filesystem::create_directories(dir_ / "checkpoints" / dir);
    if (!std::string(dir).ends_with("incomplete")) {
      WriteFileAtomic(dir_ / "checkpoints" / dir / "manifest.json", "{}");
    }
  }
  const RunReport report = LoadRunReport(dir_.path());
  EXPECT_EQ(report.checkpoints, (std::vector<int64_t>{20, 40, 50}));
  EXPECT_EQ(BestCheckpoint(report.checkpoints, report.metrics), 40);
  const std::string html = RenderReportHtml(report);
  EXPECT_NE(html.find("<tr data-step=\"40\" class=\"best\"><td>checkpoints/step-40</td>"
                      "<td class=\"num\">0.7000</td><td>best</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>checkpoints/step-50</td><td class=\"num\">-</td><td>newest</td>"),
            std::string::npos);
  EXPECT_EQ(html.find("step-60"), std::string::npos);
  EXPECT_EQ(html.find("step-10<"), std::string::npos);
  // The run's own choice (train.best in best.json) wins: MRR, lower is better.
  WriteFileAtomic(dir_ / "best.json",
                  R"({"step": 20, "metric": "valid/mrr", "mode": "min", "value": 0.5})");
  const RunReport chosen = LoadRunReport(dir_.path());
  EXPECT_EQ(chosen.best, 20);
  EXPECT_EQ(BestCheckpoint(chosen.checkpoints, chosen.metrics, "valid/mrr", false), 20);
  EXPECT_NE(RenderReportHtml(chosen).find("<th class=\"num\">valid mrr</th>"), std::string::npos);
}

TEST_F(RunDirReport, TheProfileSectionHasTheTableBoundAndMfu) {
  const std::string html = Html();
  EXPECT_NE(html.find("id=\"profile-summary\""), std::string::npos);
  EXPECT_NE(html.find("<span class=\"badge\">compute</span>"), std::string::npos);
  EXPECT_NE(html.find("forward and backward take 90% of the step at 25% MFU"), std::string::npos);
  EXPECT_NE(html.find("25.0% of 0.400 TFLOP/s (measured matmul)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">5.000</td><td class=\"num\">50.0%</td>"),
            std::string::npos);                     // backward: 0.5 s over 100 steps
  EXPECT_NE(html.find("bf16"), std::string::npos);  // the advice
}

TEST_F(RunDirReport, ConfigTextIsEscaped) {
  const std::string html = Html();
  EXPECT_NE(html.find("name: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"),
            std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<details id=\"config\">"), std::string::npos);
}

TEST_F(RunDirReport, ThePageLoadsNothingFromElsewhere) {
  const std::string html = Html();
  for (const char* ref : {" src=", "href=\"http", "url(", "@import", "<script", "<iframe"}) {
    EXPECT_EQ(html.find(ref), std::string::npos) << ref;
  }
}

TEST_F(RunDirReport, AMissingProfileIsNotedAndLeftOut) {
  std::filesystem::remove(dir_ / kProfileFile);
  const RunReport report = LoadRunReport(dir_.path());
  EXPECT_FALSE(report.profile);
  ASSERT_FALSE(report.warnings.empty());
  EXPECT_NE(report.warnings.back().find("no profile.json"), std::string::npos);
  const std::string html = RenderReportHtml(report);
  EXPECT_NE(html.find("No profile.json in this run directory"), std::string::npos);
  EXPECT_EQ(html.find("id=\"profile-summary\""), std::string::npos);
  EXPECT_EQ(CountsOf(html, "loss").points, 5);  // the rest is still there
}

TEST_F(RunDirReport, ADamagedProfileIsNotedWithItsError) {
  WriteFileAtomic(dir_ / kProfileFile, "{\"profile\": {}}");
  const RunReport report = LoadRunReport(dir_.path());
  EXPECT_FALSE(report.profile);
  EXPECT_NE(report.profile_note.find("cannot read the profile"), std::string::npos);
}

TEST_F(RunDirReport, PlotsWithoutDataSayWhy) {
  WriteFileAtomic(dir_ / kMetricsFile, R"({"step":10,"time":1,"loss":0.5})"
                                       "\n");
  const std::string html = Html();
  EXPECT_EQ(CountsOf(html, "loss").points, 1);
  EXPECT_EQ(CountsOf(html, "validation").points, 0);
  EXPECT_NE(html.find("no evaluation records"), std::string::npos);
  EXPECT_EQ(CountsOf(html, "phases").points, 0);
}

TEST(RunReport, NoMetricsSaysWhatToDo) {
  testing::TempDir dir;
  try {
    LoadRunReport(dir.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(e.Message().find("no metrics.jsonl in " + dir.path().string() +
                               ": is this a run directory?"),
              std::string::npos)
        << e.Message();
    EXPECT_NE(e.Message().find("topspin train CONFIG"), std::string::npos);
  }
  EXPECT_THROW(LoadRunReport(dir / "absent"), Error);
}

}  // namespace
}  // namespace topspin
