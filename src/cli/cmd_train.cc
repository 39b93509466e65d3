// topspin train CONFIG [--set k=v]... [--run-dir DIR] [--resume auto|PATH [--extend]]
// [--init-from CHECKPOINT]
// [--nproc N] [--nnodes M --node-rank K --master-addr HOST --master-port P]:
// trains the search ranker (topspin/train/ranker_trainer.h). Without
// --run-dir a new numbered run directory <run.dir>/<run.name>-NNN is made
// (with the resolved config); --resume auto continues the newest complete
// checkpoint of --run-dir (with --extend: past a raised train.steps);
// --init-from CHECKPOINT starts a new run from a checkpoint's weights.
//
// Distributed (docs/DISTRIBUTED.md): the job layer (topspin/dist/job.h)
// decides this process's role. With --nproc N (or --nnodes M) it is the
// launcher: it spawns the local ranks running the same command, supervises
// them and exits non-zero naming the first rank that failed. A process
// started by torchrun, srun, mpirun or SageMaker is a rank already and
// needs --run-dir shared by all ranks.
#include <cmath>
#include <csignal>
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_request.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"
#include "topspin/dist/job.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string path;
  std::vector<std::string> overrides;
  JobArgs job;
  bool extend = false;
  std::string init_from;
};

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
int PrintResult(const RankerTrainResult& r, const Config& config, const LaunchEnv& env,
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
      "trained       {} steps{}, {:.0f} docs/s, last loss {:.4f}{}\n", r.step,
      r.resumed_from >= 0 ? fmt::format(" (resumed at {})", r.resumed_from) : "", r.docs_per_s,
      r.last_loss,
      r.skipped_steps > 0 ? fmt::format(", {} non-finite steps skipped", r.skipped_steps) : "");
  if (!std::isnan(r.valid_ndcg10)) fmt::print("valid         NDCG@10 {:.4f}\n", r.valid_ndcg10);
  fmt::print("phases        {}\n", DescribePhases(r));
  const int64_t zero = env.world_size > 1 ? config.GetInt("dist.zero") : 0;
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
    fmt::print("best          {} (valid {} {:.4f}; eval and score use it)\n",
               (dir / "checkpoints" / fmt::format("step-{}", r.best_step)).string(), r.best_metric,
               r.best_value);
  }
  if (!r.early_stop.empty()) fmt::print("stopped early at step {}: {}\n", r.step, r.early_stop);
  if (!r.stopped) return 0;
  fmt::print("continue      with --resume auto --run-dir {}\n", dir.string());
  std::fflush(stdout);
  return stop_status;
}
#endif

void RunTrain(const TrainArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const Config config = Config::Load(args.path, args.overrides, TopspinSchema());
  SetLogLevel(config.GetString("run.log_level"));
  CheckTrainFlags(args);
  const JobPlan plan = PlanJob(args.job, config);
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
  RankerTrainResult r;
  try {
    r = TrainRanker(config, {.run_dir = dir,
                             .resume = args.job.resume,
                             .extend = args.extend,
                             .init_from = args.init_from,
                             .stop_requested = StopRequested,
                             .launch = env,
                             .rendezvous = RendezvousFromEnvironment(config)});
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
  if (const int status = PrintResult(r, config, env, dir); status != 0) throw ExitRequest(status);
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which training needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void RegisterTrain(CLI::App& app) {
  static TrainArgs args;
  auto* cmd = app.add_subcommand("train", "Train the search ranker from a config");
  cmd->add_option("CONFIG", args.path, "YAML config (configs/ranker-shop.yaml)")->required();
  cmd->add_option("--set", args.overrides, "override a key: --set data.train=DIR (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", args.job.run_dir,
                  "write into this directory (default: a new "
                  "<run.dir>/<run.name>-NNN)");
  cmd->add_option("--resume", args.job.resume,
                  "auto: continue the newest complete checkpoint of --run-dir; or a step-N dir");
  cmd->add_flag("--extend", args.extend,
               "with --resume: train a run on past its train.steps (raise it with --set "
               "train.steps=N); the schedule becomes the one over the new steps");
  cmd->add_option("--init-from", args.init_from,
                  "start a new run from this checkpoint's weights (a run dir or step-N dir); "
                  "optimizer state, step and schedule start fresh");
  cmd->add_option("--nproc", args.job.nproc, "ranks on this host (default dist.nproc)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nnodes", args.job.nnodes, "hosts in the job (run this command on each)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank", args.job.node_rank, "this host's index, 0 .. nnodes-1")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--master-addr", args.job.master_addr, "host of rank 0 (several hosts)")
      ->capture_default_str();
  cmd->add_option("--master-port", args.job.master_port, "rendezvous port on --master-addr")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->callback([] { RunTrain(args); });
}

}  // namespace topspin::cli
