// A Chrome/Perfetto trace (Trace Event Format: "X" complete events and
// "M" thread-name metadata) recorded in memory and written as JSON that
// ui.perfetto.dev and chrome://tracing open.
//
// Tracks are rows in the viewer (one per thread or role: "trainer",
// "loader"). Events carry seconds relative to the recorder's start
// (steady clock). Thread-safe; at most `max_events` are kept, later ones
// are counted in dropped().
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace topspin {

class TraceRecorder {
 public:
  explicit TraceRecorder(size_t max_events = size_t{1} << 20);

  // Seconds since construction.
  double Now() const;
  // The id of the track called `name` (made on first use).
  int Track(const std::string& name);
  // One span [start_s, start_s + dur_s) on `track`.
  void Complete(int track, std::string name, const char* category, double start_s, double dur_s);

  size_t size() const;
  size_t dropped() const;
  // Writes {"traceEvents": [...], "displayTimeUnit": "ms"}.
  void Write(const std::filesystem::path& path) const;

 private:
  struct Event {
    int track;
    std::string name;
    const char* category;
    double start_s, dur_s;
  };
  const std::chrono::steady_clock::time_point start_;
  const size_t max_events_;
  mutable std::mutex mu_;
  std::vector<std::string> tracks_;  // guarded by mu_
  std::vector<Event> events_;        // guarded by mu_
  size_t dropped_ = 0;               // guarded by mu_
};

}  // namespace topspin
