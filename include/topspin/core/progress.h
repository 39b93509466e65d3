// Progress display for long jobs (convert, train, bench).
//
// On a terminal: one line redrawn in place at most 10 times a second,
//   "train  [=========>          ]  45.0%  4500/10000  1.23k/s  ETA 0:04:28".
// Not on a terminal (CI, log files): a plain line every `interval_s`
// seconds, plus one at the end. Update() is thread-safe and cheap (it
// returns at once when nothing needs drawing).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace topspin {

struct ProgressOptions {
  double interval_s = 10.0;     // non-terminal: seconds between lines
  double tty_interval_s = 0.1;  // terminal: seconds between redraws
  std::string unit = "";        // appended to rates: "rows", "steps", ...
  // Where lines go; empty = stderr. Receives whole lines; on a terminal
  // they start with '\r' and carry no newline until Finish().
  std::function<void(const std::string&)> sink;
  // nullopt: detect with isatty(stderr).
  std::optional<bool> is_tty;
  // For tests: the clock; empty = steady_clock.
  std::function<double()> now_s;
};

class Progress {
 public:
  // total == 0: unknown total (no bar, no ETA).
  Progress(std::string label, uint64_t total, ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the number of items done so far (monotone).
  void Update(uint64_t done);
  void Add(uint64_t items);
  // Draws the final line (with total time) once.
  void Finish();
  // The work ended with what was done (a stream that ran out before the
  // estimated total): the final line counts it as the total, at 100%.
  void Complete();

 private:
  void DrawLocked(bool final);
  double Now() const;

  std::mutex mu_;
  std::string label_;
  uint64_t total_;
  ProgressOptions options_;
  bool tty_;
  double start_s_;
  double last_draw_s_;
  uint64_t done_ = 0;      // guarded by mu_
  bool finished_ = false;  // guarded by mu_
  bool on_stderr_ = false;  // the default sink: the bar shares stderr with log lines
};

// Log lines and a terminal progress bar share stderr: `write` (one log
// line) runs with the bar erased, and the bar is drawn again below it, so
// a line never glues onto the bar. The console log sink (core/log.h) calls
// it; without a bar on screen it only runs `write`.
void WithProgressLineCleared(const std::function<void()>& write);

// Pure formatting, exposed for tests.
// "0:04:28", "12:03:00", "3d 02:00:00"; "?" for a negative or infinite time.
std::string FormatDuration(double seconds);
// "999", "1.23k", "45.6M".
std::string FormatCount(double value);
// The progress line without terminal control characters.
std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               double elapsed_s, const std::string& unit, bool final,
                               int bar_width);

}  // namespace topspin
