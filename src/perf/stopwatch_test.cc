#include "topspin/perf/stopwatch.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace topspin {
namespace {

using std::chrono::milliseconds;

TEST(Stopwatch, MeasuresASleep) {
  Stopwatch watch;
  std::this_thread::sleep_for(milliseconds(20));
  const double elapsed = watch.ElapsedSeconds();
  EXPECT_GE(elapsed, 0.020);
  EXPECT_LT(elapsed, 2.0);
  EXPECT_GE(watch.ElapsedSeconds(), elapsed);  // monotonic
}

TEST(Stopwatch, RestartReturnsTheLapAndStartsAgain) {
  Stopwatch watch;
  std::this_thread::sleep_for(milliseconds(20));
  const double lap = watch.Restart();
  EXPECT_GE(lap, 0.020);
  EXPECT_LT(lap, 2.0);
  EXPECT_LT(watch.ElapsedSeconds(), lap);
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GE(watch.Restart(), 0.005);
}

TEST(ScopedTimer, AddsItsLifetimeToTheSink) {
  double sink = 1.0;
  {
    ScopedTimer timer(sink);
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(sink, 1.0);  // nothing added before destruction
  }
  EXPECT_GE(sink, 1.020);
  EXPECT_LT(sink, 3.0);
  const double after_first = sink;
  {
    ScopedTimer timer(sink);
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GE(sink, after_first + 0.010);  // accumulates
}

}  // namespace
}  // namespace topspin
