#include "topspin/core/progress.h"

#include <vector>

#include <spdlog/spdlog.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topspin/core/log.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(FormatDuration, HoursMinutesSecondsAndDays) {
  EXPECT_EQ(FormatDuration(0), "0:00:00");
  EXPECT_EQ(FormatDuration(268), "0:04:28");
  EXPECT_EQ(FormatDuration(43380), "12:03:00");
  EXPECT_EQ(FormatDuration(3 * 86400 + 7200), "3d 02:00:00");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(FormatCount, SiSuffixes) {
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1234), "1.23k");
  EXPECT_EQ(FormatCount(45600000), "45.6M");
  EXPECT_EQ(FormatCount(2.5), "2.50");
}

TEST(FormatProgressLine, ShowsPercentRateAndEta) {
  // 4500 of 10000 in 3.6 s: 1.25k/s, 5500 left -> 4.4 s.
  const std::string line = FormatProgressLine("train", 4500, 10000, 3.6, "steps", false, 10);
  EXPECT_EQ(line, "train  [====>     ]   45.0%  4500/10000  1.25k steps/s  ETA 0:00:04");
  EXPECT_THAT(FormatProgressLine("convert", 10, 0, 2, "rows", true, 10),
              "convert  10  5 rows/s  took 0:00:02");
}

struct FakeClock {
  double t = 0;
  std::vector<std::string> lines;
  ProgressOptions Options(bool tty) {
    ProgressOptions o;
    o.interval_s = 10;
    o.is_tty = tty;
    o.now_s = [this] { return t; };
    o.sink = [this](const std::string& l) { lines.push_back(l); };
    return o;
  }
};

TEST(Progress, NotATerminalPrintsPlainLinesEveryInterval) {
  FakeClock clock;
  {
    Progress p("rows", 100, clock.Options(false));
    for (int i = 1; i <= 100; ++i) {
      clock.t += 0.5;  // 50 s in all -> a line at 10, 20, 30, 40, 50 s, then the final one
      p.Update(i);
    }
  }
  ASSERT_EQ(clock.lines.size(), 6u);
  for (const auto& l : clock.lines) {
    EXPECT_EQ(l.back(), '\n');
    EXPECT_EQ(l.find('\r'), std::string::npos);
  }
  EXPECT_THAT(clock.lines[0], HasSubstr("20/100"));
  EXPECT_THAT(clock.lines.back(), HasSubstr("100.0%"));
  EXPECT_THAT(clock.lines.back(), HasSubstr("took 0:00:50"));
}

TEST(Progress, TerminalRedrawsOneLine) {
  FakeClock clock;
  Progress p("rows", 10, clock.Options(true));
  for (int i = 1; i <= 10; ++i) {
    clock.t += 0.2;
    p.Update(i);
  }
  p.Finish();
  p.Finish();  // once only
  ASSERT_EQ(clock.lines.size(), 11u);
  EXPECT_THAT(clock.lines[0], StartsWith("\r"));
  EXPECT_EQ(clock.lines[0].find('\n'), std::string::npos);
  EXPECT_EQ(clock.lines.back().back(), '\n');
  EXPECT_THAT(clock.lines.back(), HasSubstr("[========================]"));
}

TEST(Progress, LogLinesDoNotGlueOntoATerminalBar) {
  InitLogging("info");
  testing::internal::CaptureStderr();
  {
    Progress p("work", 10, {.tty_interval_s = 0, .is_tty = true});  // draws on stderr
    p.Update(3);
    spdlog::info("hello");
    p.Update(5);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  // The bar at 3/10 is erased before the log line, which starts a line of
  // its own, and drawn again after it.
  const size_t hello = err.find("hello\n");
  ASSERT_NE(hello, std::string::npos) << err;
  const size_t bar = err.find("3/10");
  ASSERT_LT(bar, hello) << err;
  const std::string between = err.substr(bar, hello - bar);
  EXPECT_THAT(between, HasSubstr("\r\033[2K20")) << between;  // erased, then the timestamp
  EXPECT_THAT(err.substr(hello), StartsWith("hello\n\r\033[2Kwork")) << err;
  EXPECT_THAT(err, HasSubstr("5/10"));
}

TEST(Progress, CompleteCountsWhatWasDoneAsTheTotal) {
  std::vector<std::string> lines;
  {
    Progress p("stream", 201, {.sink = [&](const std::string& l) { lines.push_back(l); },
                               .is_tty = false});
    p.Update(200);
    p.Complete();
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("100.0%  200/200")) << lines[0];
}

}  // namespace
}  // namespace topspin
