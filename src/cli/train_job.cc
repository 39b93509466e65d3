#include "cli/train_job.h"

#include <cmath>
#include <csignal>
#include <filesystem>

#include <fmt/format.h>

#include "cli/exit_request.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

#ifdef TOPSPIN_HAVE_TORCH
// --extend and --init-from against the other flags.
void CheckTrainFlags(const TrainArgs& args) {
  if (args.extend && args.job.resume.empty()) {
    throw Error(ErrorKind::kUsage, "--extend continues a run: it needs --resume",
                {.field = "--extend"},
                "pass --resume auto --run-dir RUN --extend --set train.steps=N");
  }
  if (!args.init_from.empty() && !args.job.resume.empty()) {
    throw Error(ErrorKind::kUsage,
                "--init-from starts a new run from a checkpoint's weights; --resume continues one",
                {.field = "--init-from"},
                "drop --resume to fine-tune from the checkpoint, or drop --init-from to continue "
                "the run");
  }
  if (!args.init_from.empty() && !fs::is_directory(args.init_from)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} is not a directory", args.init_from),
                {.file = args.init_from, .field = "--init-from"},
                "pass a run directory (its best checkpoint) or a checkpoints/step-N directory");
  }
}

// "rank 1: topspin rank 1 of 2 ... (gloo, file store)": each rank's first line.
void PrintRankLine(const LaunchEnv& env) {
  std::string world = Describe(env);
  if (std::getenv("TOPSPIN_SPAWNED") != nullptr) world.replace(0, env.name.size(), "topspin");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  fmt::print("rank {}: {} (gloo, {})\n", env.rank, world,
             std::getenv("TOPSPIN_RENDEZVOUS_FILE")             ? "file store"
             : agent != nullptr && std::string(agent) == "True" ? "tcp store: torchrun's agent store"
                                                                : "tcp store");
  std::fflush(stdout);
}

// What rank 0 prints when the run ends; returns the exit status.
int PrintResult(const TrainResult& r, const Settings& settings, const LaunchEnv& env,
                const fs::path& dir) {
  // A run stopped by a signal exits 128 + the signal (130 SIGINT, 143
  // SIGTERM) after its checkpoint, so scripts and launchers do not take it
  // for a finished run; a rank stopped because another rank was signalled
  // exits as if terminated (143).
  const int stop_status = 128 + (StopSignal() != 0 ? StopSignal() : SIGTERM);
  if (env.rank != 0) return r.stopped ? stop_status : 0;  // rank 0 reports for the job
  if (r.stopped) fmt::print("stopped       at step {} by a signal, after a checkpoint\n", r.step);
  if (r.resumed_from >= 0 && r.resumed_from == r.step) {
    fmt::print("trained       nothing: the run had already finished its {} steps ({}); to train "
               "on, raise train.steps and add --extend\n",
               r.step, r.checkpoint.string());
    return 0;
  }
  fmt::print(
      "trained       {} steps{}, {:.0f} {}/s, last loss {:.4f}{}\n", r.step,
      r.resumed_from >= 0 ? fmt::format(" (resumed at {})", r.resumed_from) : "", r.items_per_s,
      r.unit,
      r.last_loss,
      r.skipped_steps > 0 ? fmt::format(", {} non-finite steps skipped", r.skipped_steps) : "");
  if (!std::isnan(r.valid_ndcg10)) {
    fmt::print("valid         NDCG@10 {:.4f}\n", r.valid_ndcg10);
  } else if (const auto loss = r.valid.find("loss"); loss != r.valid.end()) {
    fmt::print("valid         loss {:.4f}, perplexity {:.2f}\n", loss->second, std::exp(loss->second));
  }
  fmt::print("phases        {}\n", DescribePhases(r));
  const int64_t zero = env.world_size > 1 ? settings.dist.zero : 0;
  fmt::print(
      "memory        dense optimizer state {} bytes per rank, gradients {} bytes per rank{} "
      "({} parameters{})\n",
      r.dense_optimizer_bytes, r.dense_grad_bytes,
      r.grad_staging_peak_bytes > 0
          ? fmt::format(" + at most {} in flight", r.grad_staging_peak_bytes)
          : "",
      r.dense_params, zero > 0 ? fmt::format(", ZeRO-{}", zero) : "");
  fmt::print("checkpoint    {}\n", r.checkpoint.string());
  if (r.best_step >= 0) {
    fmt::print("best          {} (valid {} {:.4f}; {} use it)\n",
               (dir / "checkpoints" / fmt::format("step-{}", r.best_step)).string(), r.best_metric,
               r.best_value, settings.model.kind == "gpt" ? "eval and generate" : "eval and score");
  }
  if (!r.early_stop.empty()) fmt::print("stopped early at step {}: {}\n", r.step, r.early_stop);
  if (!r.stopped) return 0;
  fmt::print("continue      with --resume auto --run-dir {}\n", dir.string());
  std::fflush(stdout);
  return stop_status;
}
#endif

}  // namespace

#ifdef TOPSPIN_HAVE_TORCH
// --tune: the tuned settings after the user's overrides (the launcher and a
// single process tune or read the cache; a rank only reads it).
std::vector<std::string> TunedOverrides(const TrainArgs& args, const JobPlan& plan) {
  std::vector<std::string> overrides = args.overrides;
  if (!args.tune) return overrides;
  TuneArgs t = args.tune_args;
  t.config = args.path;
  t.overrides = args.overrides;
  t.world_size = plan.role == JobRole::kRank       ? plan.env.world_size
                 : plan.role == JobRole::kLauncher ? plan.nproc * args.job.nnodes
                                                   : 1;
  TuneRequest request = MakeTuneRequest(t);
  request.cache_only = plan.role == JobRole::kRank;
  if (request.cache_only) request.say = nullptr;
  const TuneReport r = Tune(request);
  if (plan.role != JobRole::kRank) {
    for (const std::string& line : r.summary) fmt::print("tune          {}\n", line);
    fmt::print("tune          {} ({})\n", fmt::join(r.sets, " "),
               r.cache_hit ? "from the cache" : "measured now, cached");
  }
  overrides.insert(overrides.end(), r.sets.begin(), r.sets.end());
  return overrides;
}
#endif

void RunTrainJob(const TrainArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const Config untuned = Config::Load(args.path, args.overrides, TopspinSchema());
  SetLogLevel(Settings::From(untuned).run.log_level);
  CheckTrainFlags(args);
  const JobPlan plan = PlanJob(args.job, Settings::From(untuned).dist);
  const Config config =
      args.tune ? Config::Load(args.path, TunedOverrides(args, plan), TopspinSchema()) : untuned;
  const Settings settings = Settings::From(config);
  if (plan.role == JobRole::kLauncher) {
    if (const int status = LaunchJob(args.job, config, plan.nproc); status != 0) {
      throw ExitRequest(status);
    }
    return;
  }
  const LaunchEnv& env = plan.env;
  if (env.world_size > 1) PrintRankLine(env);
  const PreparedRun run = PrepareRun(args.job, config, plan);
  const fs::path& dir = run.dir;
  if (plan.role == JobRole::kSingle) fmt::print("run directory {}\n", dir.string());
  std::fflush(stdout);
  InstallStopSignals();
  ApplyProcessPolicy(settings.train.torch_threads);
  TrainResult r;
  try {
    r = Train(config, {.run_dir = dir,
                       .resume = args.job.resume,
                       .extend = args.extend,
                       .init_from = args.init_from,
                       .stop_requested = StopRequested,
                       .launch = env,
                       .rendezvous = RendezvousFromEnvironment(settings.dist)});
  } catch (const Error&) {
    // A numbered directory made for this start and failed before it held
    // anything of the run's (a bad path, a model too big) is clutter.
    if (env.rank == 0 && args.job.run_dir.empty() && !fs::exists(dir / "checkpoints") &&
        !fs::exists(dir / "metrics.jsonl")) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
    throw;
  }
  if (const int status = PrintResult(r, settings, env, dir); status != 0) throw ExitRequest(status);
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which training needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}


}  // namespace topspin::cli
