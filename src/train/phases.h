// Where a training step's time goes: named phases (data_wait, h2d,
// forward, backward, sync, optimizer, log, eval, checkpoint) summed in
// seconds, each also a span on the trace's track when there is a trace.
//
// Phases::Time(name) returns a scope timer. With an enabled DeviceTimer
// (CUDA) and `on_device`, the phase is timed on the GPU instead (the host
// time of asynchronous launches means little); the trace keeps the host
// span.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "topspin/perf/trace.h"
#include "train/device_timer.h"

namespace topspin {

class PhaseTimer {
 public:
  PhaseTimer(std::map<std::string, double>& phases, const char* name, TraceRecorder* trace,
             int track, DeviceTimer* device = nullptr)
      : total_(phases[name]),
        name_(name),
        trace_(trace),
        track_(track),
        device_(device),
        span_(device != nullptr ? device->Begin(name) : -1),
        start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (span_ >= 0) {
      device_->End(span_);
    } else {
      total_ += secs;
    }
    if (trace_ != nullptr) trace_->Complete(track_, name_, "phase", trace_->Now() - secs, secs);
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& total_;
  const char* name_;
  TraceRecorder* trace_;
  int track_;
  DeviceTimer* device_;
  int span_;
  std::chrono::steady_clock::time_point start_;
};

// The phase totals of one process and where their spans go.
struct Phases {
  std::map<std::string, double> seconds;
  TraceRecorder* trace = nullptr;
  int track = 0;
  DeviceTimer* device = nullptr;  // CUDA phases on the GPU; null or disabled on the CPU

  // Host-timed: data_wait, sync, log, eval, checkpoint.
  PhaseTimer Time(const char* name) { return PhaseTimer(seconds, name, trace, track); }
  // Starts `timer` (ending the phase it timed); `on_device`: forward,
  // backward, optimizer, timed on the GPU where there is one.
  void Begin(std::optional<PhaseTimer>& timer, const char* name, bool on_device = false) {
    timer.reset();
    timer.emplace(seconds, name, trace, track, on_device ? device : nullptr);
  }
};

}  // namespace topspin
