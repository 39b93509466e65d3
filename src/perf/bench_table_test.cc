#include "topspin/perf/bench_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

TEST(BenchTable, InterleavedCasesRunInRoundsAfterAWarmUp) {
  std::string order;
  const auto best = BestSecondsInterleaved(
      2, {[&] { order += 'a'; }, [&] { order += 'b'; }, [&] { order += 'c'; }});
  EXPECT_EQ(order, "abcabcabc");  // warm-up round, then two measured rounds
  ASSERT_EQ(best.size(), 3u);
  for (double s : best) {
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 1);
  }
}

TEST(BenchTable, RatioAndJsonCarryEveryRow) {
  const BenchTable t{"demo", "setup line", {{"ours case", 3, "peer case", 2, "GB/s"}}};
  EXPECT_DOUBLE_EQ(t.rows[0].ratio(), 1.5);
  const std::string json = BenchTableJson(t);
  EXPECT_NE(json.find("\"ratio\": 1.5"), std::string::npos) << json;
  EXPECT_NE(FormatBenchTable(t).find("1.50x"), std::string::npos) << FormatBenchTable(t);
}

TEST(BenchTable, ColumnsAlignAndMeaninglessRatiosSayDash) {
  const BenchTable t{"demo",
                     "setup",
                     {{"throughput", 1234.5, "peer", 1000, "docs/s"},
                      {"sync share", 3.2, "not overlapped", 0.00001, "% of step", Better::kLower},
                      {"model state", 12345678, "formula", 12345678, "bytes", Better::kSame},
                      {"latency", 80, "PyTorch's Gloo", 100, "µs", Better::kLower}}};
  const std::string text = FormatBenchTable(t);
  const auto lines = [&] {
    std::vector<std::string> out;
    size_t at = text.find('\n') + 1;  // after the setup line
    while (at < text.size()) {
      const size_t nl = text.find('\n', at);
      out.push_back(text.substr(at, nl - at));
      at = nl + 1;
    }
    return out;
  }();
  ASSERT_EQ(lines.size(), 5u) << text;
  // Every ratio ends in the same display column (µs is one column wide).
  const auto display_width = [](const std::string& s) {
    size_t w = 0;
    for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
    return w;
  };
  for (const auto& line : lines) EXPECT_EQ(display_width(line), display_width(lines[0])) << text;
  EXPECT_NE(lines[1].find(" 1234.5 "), std::string::npos) << text;
  EXPECT_NE(lines[1].find("1.23x"), std::string::npos) << text;
  // A share against ~0 has no meaningful ratio; whole numbers print whole.
  EXPECT_EQ(t.rows[1].ratio(), 0);
  EXPECT_TRUE(lines[2].ends_with(" -")) << text;
  EXPECT_EQ(lines[2].find("x"), std::string::npos) << text;
  EXPECT_NE(lines[3].find("12345678"), std::string::npos) << text;
  EXPECT_NE(lines[3].find("same"), std::string::npos) << text;
  EXPECT_NE(lines[4].find("lower"), std::string::npos) << text;
  EXPECT_NE(BenchTableJson(t).find("\"better\": \"lower\""), std::string::npos);
}

}  // namespace
}  // namespace topspin
