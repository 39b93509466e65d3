// Where a training step's time goes, and what bounds it (`topspin profile`).
//
// StepProfile is what a training run measured (the trainer fills it and
// keeps it as RUN_DIR/profile.json). Analyze() turns it into a report:
// per-phase ms per step and share, the data stall, throughput, model
// TFLOP/s and MFU (analytic FLOPs over the peak; no MFU without a known
// peak rather than a wrong one), the estimated memory traffic, and the
// bound with its evidence and the change that would help.
//
// The bound, tried in this order (shares are of the training steps' time,
// evaluation and checkpoints left out):
//   collectives  sync >= 25%: waiting on gradient exchange
//   host         data_wait >= 25%: the input pipeline cannot keep up
//   memory       the roofline: model FLOPs per byte moved (embedding rows,
//                optimizer state) below the machine balance, peak FLOP/s
//                over the measured copy bandwidth (without both peaks:
//                optimizer >= 30%)
//   compute      otherwise
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace topspin {

inline constexpr const char* kProfileFile = "profile.json";

// The order phases are reported in; "other" is wall time no phase claims.
// h2d is the time the GPU waited for a batch's host-to-device copy (what
// the copy stream did not hide); 0 on the CPU.
inline const std::vector<std::string>& ProfilePhases() {
  static const std::vector<std::string> phases = {
      "data_wait", "h2d", "forward", "backward", "sync", "optimizer", "log", "eval", "checkpoint",
      "other"};
  return phases;
}

struct StageUse {
  std::string name;     // read, decode, transform, assemble
  double busy_s = 0;    // summed over the loader's threads
};

struct StepProfile {
  int64_t steps = 0;                      // steps measured
  double wall_s = 0;                      // their wall time (this rank)
  std::map<std::string, double> phase_s;  // seconds by phase (ProfilePhases())
  double items = 0;                       // items trained (all ranks): documents, tokens
  std::string unit = "docs";              // what an item is (the Task's unit)
  int world_size = 1;
  double flops_per_item = 0;  // training FLOPs per item (3 x forward)
  double peak_flops = 0;      // FLOP/s of this rank's device; 0: unknown
  std::string peak_source;    // "measured matmul", "--peak", ...
  double peak_bytes_per_s = 0;  // memory bandwidth measured by a copy; 0: unknown
  double bytes_per_step = 0;  // estimated memory traffic (embedding rows, optimizer state)
  int loader_threads = 0;
  std::vector<StageUse> stages;  // the loader's stage busy time over the run
};

struct ProfileRow {
  std::string phase;
  double ms_per_step = 0;
  double share = 0;  // of the step
};

struct ProfileReport {
  std::vector<ProfileRow> rows;
  double step_ms = 0;
  double data_stall = 0;   // share of the step waiting on the pipeline
  double items_per_s = 0;  // StepProfile::unit per second
  double tflops = 0;       // model FLOPs achieved
  double mfu = NAN;        // tflops / peak; NaN without a peak
  double memory_gbs = 0;   // estimated traffic
  double memory_use = NAN; // memory_gbs / the measured bandwidth; NaN without one
  double flops_per_step = 0;  // this rank's model FLOPs per step
  std::string bound;       // "collectives", "host", "memory", "compute"
  std::string evidence;
  std::string advice;
};

ProfileReport Analyze(const StepProfile& profile);

// The report as the CLI prints it.
std::string FormatReport(const StepProfile& profile, const ProfileReport& report);

// JSON of the profile and its report (profile.json, `--json`).
std::string ProfileJson(const StepProfile& profile, const ProfileReport& report);
// Reads the "profile" part of ProfileJson(); Error{kData} naming the file.
StepProfile ReadProfile(const std::filesystem::path& path);

}  // namespace topspin
