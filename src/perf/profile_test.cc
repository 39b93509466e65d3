#include "topspin/perf/profile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/perf/report.h"
#include "topspin/perf/trace.h"

namespace topspin {
namespace {

// 100 steps of 10 ms: `phases` in seconds; the rest is forward.
StepProfile Profile(std::map<std::string, double> phases) {
  StepProfile p;
  p.steps = 100;
  p.wall_s = 1.0;
  double claimed = 0;
  for (const auto& [name, s] : phases) claimed += s;
  phases["forward"] += 1.0 - claimed;
  p.phase_s = phases;
  p.items = 100000;
  p.flops_per_item = 1e6;  // 0.1 TFLOP/s achieved
  p.loader_threads = 2;
  p.stages = {{"read", 0.1}, {"transform", 1.9}};
  return p;
}

TEST(Profile, NamesEachBound) {
  EXPECT_EQ(Analyze(Profile({{"sync", 0.4}})).bound, "collectives");
  const auto host = Analyze(Profile({{"data_wait", 0.6}}));
  EXPECT_EQ(host.bound, "host");
  EXPECT_NE(host.evidence.find("60% of the step waits on data; the transform stage is 95% busy "
                               "on 2 loader threads"),
            std::string::npos)
      << host.evidence;
  EXPECT_NE(host.advice.find("pipeline.threads"), std::string::npos);
  // Without peaks a large optimizer share means memory...
  EXPECT_EQ(Analyze(Profile({{"optimizer", 0.4}})).bound, "memory");
  EXPECT_EQ(Analyze(Profile({{"backward", 0.5}})).bound, "compute");
  // ...with them, the roofline decides: 1 FLOP per byte under a balance of 10.
  StepProfile low = Profile({{"backward", 0.5}});
  low.peak_flops = 1e12;
  low.peak_bytes_per_s = 1e11;
  low.bytes_per_step = 1e9;  // flops per step: 1e9
  EXPECT_EQ(Analyze(low).bound, "memory");
  low.bytes_per_step = 1e7;  // 100 FLOP per byte
  EXPECT_EQ(Analyze(low).bound, "compute");
}

// A log window of `steps` steps of 10 ms: `phases` in ms per step, the
// rest forward.
MetricsRecord Window(int64_t end_step, std::map<std::string, double> phases) {
  MetricsRecord r;
  r.step = end_step;
  double claimed = 0;
  for (const auto& [name, ms] : phases) claimed += ms;
  phases["forward"] += 10.0 - claimed;
  for (const auto& [name, ms] : phases) r.values["phase_ms/" + name] = ms;
  r.values["docs_per_s"] = 1000;
  r.values["loader_busy/transform"] = 0.5;
  return r;
}

TEST(Profile, SteadyStateLeavesTheWarmUpOutAndCountsAgreeingWindows) {
  const StepProfile whole = Profile({});
  // A cold first window waits on data; the next four compute, one of them
  // with a stall of its own.
  const std::vector<MetricsRecord> windows = {
      Window(20, {{"data_wait", 8}}), Window(40, {}), Window(60, {{"data_wait", 6}}),
      Window(80, {}), Window(100, {})};
  EXPECT_EQ(Analyze(whole).bound, "compute");
  const auto steady = AnalyzeSteadyState(whole, windows, 20);
  ASSERT_TRUE(steady.has_value());
  EXPECT_EQ(steady->windows, 4);
  EXPECT_EQ(steady->report.bound, "compute");
  EXPECT_EQ(steady->agree, 3);  // the stalled window says host
  EXPECT_EQ(steady->profile.steps, 80);
  EXPECT_NEAR(steady->profile.wall_s, 0.8, 1e-12);
  EXPECT_NEAR(steady->profile.phase_s.at("data_wait"), 0.12, 1e-12);
  // With the cold window counted the sum reads host (28% data wait), a
  // verdict only two of five windows share: the flip the warm-up avoids.
  const auto cold = AnalyzeSteadyState(whole, windows, 0);
  EXPECT_EQ(cold->report.bound, "host");
  EXPECT_EQ(cold->agree, 2);
  EXPECT_EQ(cold->windows, 5);
  // Nothing after the warm-up: no steady state to report.
  EXPECT_FALSE(AnalyzeSteadyState(whole, windows, 100).has_value());
}

TEST(Profile, ShareMfuAndNoMfuWithoutAPeak) {
  StepProfile p = Profile({{"data_wait", 0.1}, {"checkpoint", 0.5}});
  auto r = Analyze(p);
  EXPECT_DOUBLE_EQ(r.step_ms, 10.0);
  EXPECT_DOUBLE_EQ(r.items_per_s, 100000);
  EXPECT_NEAR(r.tflops, 0.1, 1e-12);
  EXPECT_TRUE(std::isnan(r.mfu));
  EXPECT_NE(FormatReport(p, r).find("MFU unknown"), std::string::npos);
  // The data stall of the training steps leaves the checkpoint out: 0.1 of
  // 0.5 s is 20%, under the host threshold; of the wall it is 10%.
  EXPECT_DOUBLE_EQ(r.data_stall, 0.1);
  EXPECT_EQ(r.bound, "compute");
  p.peak_flops = 0.4e12;
  r = Analyze(p);
  EXPECT_NEAR(r.mfu, 0.25, 1e-12);
  double share = 0;
  for (const auto& row : r.rows) share += row.share;
  EXPECT_NEAR(share, 1.0, 1e-12);
}

TEST(Profile, JsonRoundTripsAndBadFilesNameThemselves) {
  testing::TempDir dir;
  StepProfile p = Profile({{"sync", 0.3}});
  p.world_size = 2;
  p.peak_flops = 1e12;
  p.peak_source = "measured";
  WriteFileAtomic(dir / kProfileFile, ProfileJson(p, Analyze(p)));
  const StepProfile back = ReadProfile(dir / kProfileFile);
  EXPECT_EQ(back.phase_s, p.phase_s);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.stages.size(), 2u);
  EXPECT_EQ(Analyze(back).bound, Analyze(p).bound);
  WriteFileAtomic(dir / "bad.json", "{\"profile\": {}}");
  try {
    ReadProfile(dir / "bad.json");
    FAIL() << "read a profile without fields";
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("bad.json"), std::string::npos) << e.Message();
  }
}

TEST(Trace, WritesTraceEventFormat) {
  testing::TempDir dir;
  TraceRecorder trace(3);
  const int a = trace.Track("trainer"), b = trace.Track("loader");
  EXPECT_EQ(trace.Track("trainer"), a);
  trace.Complete(a, "forward", "phase", 0.001, 0.002);
  trace.Complete(b, "transform", "stage", 0.0015, 0.0005);
  trace.Complete(a, "backward", "phase", 0.003, 0.004);
  trace.Complete(a, "dropped", "phase", 0.01, 0.001);  // over max_events
  EXPECT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace.dropped(), 1u);
  trace.Write(dir / "t.json");
  const auto doc = nlohmann::json::parse(ReadFile(dir / "t.json"));
  int spans = 0, names = 0;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    EXPECT_EQ(e.at("pid"), 1);
    if (ph == "M") {
      ++names;
      EXPECT_EQ(e.at("name"), "thread_name");
    } else {
      ASSERT_EQ(ph, "X");
      ++spans;
      EXPECT_GE(e.at("dur").get<double>(), 0);
      if (e.at("name") == "forward") {
        EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 1000);
        EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2000);
        EXPECT_EQ(e.at("tid"), a + 1);
      }
    }
  }
  EXPECT_EQ(spans, 3);
  EXPECT_EQ(names, 2);
}

}  // namespace
}  // namespace topspin
