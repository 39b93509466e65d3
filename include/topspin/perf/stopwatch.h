// Wall-clock timing on the monotonic clock (std::chrono::steady_clock), which
// never jumps with NTP or manual clock changes.
//
// Neither class is thread-safe: give each thread its own.
#pragma once

#include <chrono>

namespace topspin {

// Measures the time since construction or the last Restart().
class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;

  Stopwatch() : start_(Clock::now()) {}

  // Seconds since the start; never negative.
  double ElapsedSeconds() const { return Seconds(Clock::now() - start_); }

  // Starts again from now and returns the seconds elapsed before.
  double Restart() {
    const Clock::time_point now = Clock::now();
    const double elapsed = Seconds(now - start_);
    start_ = now;
    return elapsed;
  }

 private:
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  Clock::time_point start_;
};

// Adds the seconds between its construction and destruction to `sink`,
// which must outlive the timer:
//
//   double io_seconds = 0;
//   { ScopedTimer timer(io_seconds); ReadShard(...); }
class ScopedTimer {
 public:
  explicit ScopedTimer(double& sink_seconds) : sink_(sink_seconds) {}
  ~ScopedTimer() { sink_ += watch_.ElapsedSeconds(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double& sink_;
  Stopwatch watch_;
};

}  // namespace topspin
