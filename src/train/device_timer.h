// Phase spans timed on the GPU (train.device cuda).
//
// Kernels run asynchronously, so host clocks around forward or backward
// measure only how long the launches took. On CUDA, each phase span
// records a CUDA event on the compute stream where it begins and ends;
// Collect() adds the elapsed time of every completed span to the phase
// totals. The trainer collects once per log window (waiting for the newest
// span), so timing adds no host synchronisation to a step. Every span is
// also an NVTX range, so Nsight Systems shows the phases by name.
//
// On the CPU the timer is disabled: Begin() returns -1 and the trainer
// keeps timing on the host. Not thread-safe; one per training process.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "topspin/train/device.h"

namespace topspin {

class DeviceTimer {
 public:
  explicit DeviceTimer(const ComputeDevice& device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  bool enabled() const;
  // Opens a span of `phase` (an NVTX start/end range too: spans need not
  // nest); returns its id, -1 when disabled. `phase` must outlive nothing:
  // it is copied.
  int Begin(const char* phase);
  void End(int span);
  // Adds the seconds of completed spans to phases[name]; with `wait`,
  // first waits for the newest span to complete (all of them then have).
  void Collect(std::map<std::string, double>& phases, bool wait);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
