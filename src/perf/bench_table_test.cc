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

}  // namespace
}  // namespace topspin
