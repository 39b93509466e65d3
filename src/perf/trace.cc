#include "topspin/perf/trace.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "topspin/core/files.h"

namespace topspin {

TraceRecorder::TraceRecorder(size_t max_events)
    : start_(std::chrono::steady_clock::now()), max_events_(max_events) {}

double TraceRecorder::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int TraceRecorder::Track(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = std::find(tracks_.begin(), tracks_.end(), name);
  if (it != tracks_.end()) return static_cast<int>(it - tracks_.begin());
  tracks_.push_back(name);
  return static_cast<int>(tracks_.size() - 1);
}

void TraceRecorder::Complete(int track, std::string name, const char* category, double start_s,
                             double dur_s) {
  std::lock_guard lock(mu_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back({track, std::move(name), category, start_s, dur_s});
}

size_t TraceRecorder::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

size_t TraceRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void TraceRecorder::Write(const std::filesystem::path& path) const {
  std::lock_guard lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  for (size_t t = 0; t < tracks_.size(); ++t) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", t + 1},
                      {"args", {{"name", tracks_[t]}}}});
  }
  for (const auto& e : events_) {
    // Microseconds, as the format wants; fractions keep sub-µs spans.
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", e.track + 1},
                      {"ts", e.start_s * 1e6},
                      {"dur", e.dur_s * 1e6}});
  }
  const nlohmann::json doc{{"traceEvents", events},
                           {"displayTimeUnit", "ms"},
                           {"otherData", {{"producer", "topspin"}, {"dropped", dropped_}}}};
  WriteFileAtomic(path, doc.dump() + "\n");
}

}  // namespace topspin
