// topspin profile CONFIG [--steps N] [--set k=v]... [--trace FILE] [--json FILE]
//                        [--peak TFLOPS] [--peak-gbs GBS]
// topspin profile RUN_DIR [--json FILE] [--peak TFLOPS] [--peak-gbs GBS]
//
// Where a training step's time goes (topspin/perf/profile.h): trains N
// steps of CONFIG in a new run directory (no evaluation, no checkpoint) and
// prints the phase table, throughput, MFU, the bound and what to try; or
// reads the profile.json a training run left in RUN_DIR.
#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/run_dir.h"
#include "topspin/perf/profile.h"
#include "topspin/perf/report.h"
#include "topspin/perf/trace.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct ProfileArgs {
  std::string target;
  int64_t steps = 200;
  std::vector<std::string> overrides;
  std::string trace;
  std::string json;
  double peak_tflops = 0;
  double peak_gbs = 0;
  std::string run_dir;
};

// Seconds one traced phase costs: two clock reads and a recorded span.
[[maybe_unused]] double SecondsPerSpan() {  // unused without LibTorch
  constexpr int kSpans = 100000;
  TraceRecorder scratch(kSpans);
  const int track = scratch.Track("scratch");
  const double start = scratch.Now();
  for (int i = 0; i < kSpans; ++i) {
    const double t = scratch.Now();
    scratch.Complete(track, "forward", "phase", t, scratch.Now() - t);
  }
  return (scratch.Now() - start) / kSpans;
}

// The first 20% of the steps (a cold cache, a first epoch's reads) are the
// warm-up the steady-state verdict leaves out.
int64_t WarmupSteps(int64_t steps) { return steps / 5; }

void Print(const StepProfile& profile, const ProfileArgs& args,
           const std::optional<SteadyState>& steady = std::nullopt) {
  const ProfileReport report = Analyze(profile);
  fmt::print("{}", FormatReport(profile, report));
  if (steady) {
    // The verdict that holds after the warm-up, and how many log windows
    // on their own agree with it.
    fmt::print("steady state  after a {}-step warm-up: {} in {} of {} log windows ({:.0f}%): {}\n",
               WarmupSteps(profile.steps), steady->report.bound, steady->agree, steady->windows,
               100.0 * steady->agree / steady->windows, steady->report.evidence);
  }
  if (!args.json.empty()) WriteFileAtomic(args.json, ProfileJson(profile, report));
}

// The steady state of the run `dir` holds (its metrics.jsonl windows).
std::optional<SteadyState> SteadyStateOf(const fs::path& dir, const StepProfile& profile) {
  if (!fs::exists(dir / "metrics.jsonl")) return std::nullopt;
  return AnalyzeSteadyState(profile, ReadMetricsLog(dir / "metrics.jsonl").train,
                            WarmupSteps(profile.steps));
}

void ProfileConfig(const ProfileArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  std::vector<std::string> overrides = args.overrides;
  overrides.push_back(fmt::format("train.steps={}", args.steps + 1));
  overrides.push_back("train.eval_every=0");
  overrides.push_back("train.checkpoint_every=0");
  // Ten log windows: enough to tell a steady verdict from a cold start.
  overrides.push_back(fmt::format("train.log_every={}", std::max<int64_t>(1, args.steps / 10)));
  const Config config = Config::Load(args.target, overrides, TopspinSchema());
  const Settings settings = Settings::From(config);
  SetLogLevel(settings.run.log_level);
  fs::path dir = args.run_dir;
  std::optional<RunDirLock> lock;
  if (dir.empty()) {
    dir = CreateRunDirectory(settings.run.dir, settings.run.name + "-profile", config);
    lock.emplace(dir);
  } else {
    fs::create_directories(dir);
    lock.emplace(dir);
    WriteFileAtomic(dir / "config.yaml", config.ToYaml());
  }
  TraceRecorder trace;
  RankerTrainOptions o{.run_dir = dir, .stop_after_steps = args.steps};
  o.trace = args.trace.empty() ? nullptr : &trace;
  o.peak_tflops = args.peak_tflops;
  o.peak_gbs = args.peak_gbs;
  o.measure_peak = args.peak_tflops <= 0 || args.peak_gbs <= 0;
  ApplyProcessPolicy(settings.train.torch_threads);
  const TrainResult r = Train(config, o);
  fmt::print("run directory {}\n\n", dir.string());
  Print(r.profile, args, SteadyStateOf(dir, r.profile));
  if (!args.trace.empty()) {
    trace.Write(args.trace);
    fmt::print("trace         {} ({} spans; open in ui.perfetto.dev)\n", args.trace, trace.size());
    const double spans_per_step = double(trace.size()) / double(std::max<int64_t>(1, r.profile.steps));
    const double overhead_s = spans_per_step * SecondsPerSpan();
    const double step_s = r.profile.wall_s / double(std::max<int64_t>(1, r.profile.steps));
    fmt::print("overhead      {:.2f} us per step for {:.1f} spans = {:.3f}% of the step\n",
               1e6 * overhead_s, spans_per_step, 100 * overhead_s / step_s);
  }
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which profiling needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

void RunProfile(const ProfileArgs& args) {
  const fs::path target(args.target);
  if (!fs::is_directory(target)) return ProfileConfig(args);
  const fs::path file = target / kProfileFile;
  if (!fs::exists(file)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} has no {}", target.string(), kProfileFile),
                {.file = file.string()},
                "pass a run directory that training wrote, or a config to profile");
  }
  StepProfile p = ReadProfile(file);
  if (args.peak_tflops > 0) {
    p.peak_flops = args.peak_tflops * 1e12;
    p.peak_source = "--peak";
  }
  if (args.peak_gbs > 0) p.peak_bytes_per_s = args.peak_gbs * 1e9;
  Print(p, args, SteadyStateOf(target, p));
}

}  // namespace

void RegisterProfile(CLI::App& app) {
  static ProfileArgs args;
  auto* cmd = app.add_subcommand(
      "profile", "Where a training step's time goes: phases, MFU, the bound and what to try");
  cmd->add_option("TARGET", args.target, "a config to train N steps of, or a run directory")
      ->required();
  cmd->add_option("--steps", args.steps, "steps to measure (config)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  cmd->add_option("--set", args.overrides, "override a config key (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--trace", args.trace, "write a Chrome/Perfetto trace of every phase");
  cmd->add_option("--json", args.json, "also write the profile and report as JSON");
  cmd->add_option("--peak", args.peak_tflops,
                  "peak TFLOP/s of the device for MFU (default: measure a matmul; a run "
                  "directory without one reports no MFU)");
  cmd->add_option("--peak-gbs", args.peak_gbs,
                  "memory bandwidth of the device in GB/s for the roofline (default: measure a "
                  "copy)");
  cmd->add_option("--run-dir", args.run_dir, "run directory for a config (default: a new one)");
  cmd->callback([] { RunProfile(args); });
}

}  // namespace topspin::cli
