// topspin train CONFIG [--set k=v]... [--run-dir DIR] [--resume auto|PATH [--extend]]
// [--init-from CHECKPOINT]
// [--nproc N] [--nnodes M --node-rank K --master-addr HOST --master-port P]:
// trains the search ranker (topspin/train/ranker_trainer.h). Without
// --run-dir a new numbered run directory <run.dir>/<run.name>-NNN is made
// (with the resolved config); --resume auto continues the newest complete
// checkpoint of --run-dir (with --extend: past a raised train.steps);
// --init-from CHECKPOINT starts a new run from a checkpoint's weights.
//
// Distributed (docs/DISTRIBUTED.md): with --nproc N (or --nnodes M) this
// process becomes the launcher: it spawns the local ranks
// (topspin/dist/spawn.h) running the same command, supervises them and
// exits non-zero naming the first rank that failed. A process started by
// torchrun, srun, mpirun or SageMaker is a rank already
// (topspin/dist/launch_env.h) and needs --run-dir shared by all ranks.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_request.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/run_dir.h"
#include "topspin/core/strings.h"
#include "topspin/dist/launch_env.h"
#include "topspin/dist/spawn.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

struct TrainArgs {
  std::string path;
  std::vector<std::string> overrides;
  std::string run_dir;
  std::string resume;
  bool extend = false;
  std::string init_from;
  int nproc = 0;  // 0: dist.nproc
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = kDefaultMasterAddr;
  int master_port = kDefaultMasterPort;
};

namespace fs = std::filesystem;

std::atomic<int> g_stop_signal{0};

// SIGINT/SIGTERM ask the run to checkpoint and stop; a second one kills.
[[maybe_unused]] void OnStopSignal(int sig) {  // unused without LibTorch
  g_stop_signal.store(sig);
  std::signal(sig, SIG_DFL);
}

// This process's command line (argv), from /proc/self/cmdline.
std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

// The ranks' command: ours without the launch options, with --run-dir.
std::vector<std::string> RankCommandLine(const fs::path& run_dir) {
  std::vector<std::string> in = OwnCommandLine(), out = {"/proc/self/exe"};
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) out[0] = std::string(exe, static_cast<size_t>(n));
  const std::vector<std::string> launch = {"--nproc", "--nnodes", "--node-rank", "--master-addr",
                                           "--master-port", "--run-dir"};
  for (size_t i = 1; i < in.size(); ++i) {
    const std::string& a = in[i];
    const auto eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    if (std::find(launch.begin(), launch.end(), flag) != launch.end()) {
      if (eq == std::string::npos) ++i;  // skip its value too
      continue;
    }
    out.push_back(a);
  }
  out.push_back("--run-dir");
  out.push_back(run_dir.string());
  return out;
}

// The run's directory, and its lock (run_dir.h) when `lock`: held by the
// process that owns the run on node 0 (the launcher, or the one process),
// taken before anything in the directory is written.
struct PreparedRun {
  fs::path dir;
  std::unique_ptr<RunDirLock> lock;
};

PreparedRun PrepareRunDir(const TrainArgs& args, const Config& config, bool lock) {
  PreparedRun run;
  if (args.run_dir.empty()) {
    const RunConfig rc = RunConfig::From(config);
    run.dir = CreateRunDirectory(rc.dir, rc.name, config);
    if (lock) run.lock = std::make_unique<RunDirLock>(run.dir);
    return run;
  }
  run.dir = args.run_dir;
  fs::create_directories(run.dir);  // a filesystem_error is a user error naming the path
  if (lock) run.lock = std::make_unique<RunDirLock>(run.dir);
  // A resumed run keeps the config.yaml it started with: a resume the
  // trainer refuses (another config) must not overwrite it.
  if (args.resume.empty() || !fs::exists(run.dir / "config.yaml")) {
    WriteFileAtomic(run.dir / "config.yaml", config.ToYaml());
  }
  return run;
}

// The launcher: spawns this node's ranks and supervises them.
// (Unused without LibTorch.)
[[maybe_unused]] void Launch(const TrainArgs& args, const Config& config, int nproc) {
  const PreparedRun run = PrepareRunDir(args, config, /*lock=*/args.node_rank == 0);
  const fs::path& dir = run.dir;
  fmt::print("run directory {}\n", dir.string());
  std::fflush(stdout);
  SpawnOptions o;
  o.argv = RankCommandLine(dir);
  o.nproc = nproc;
  o.node_rank = args.node_rank;
  o.nnodes = args.nnodes;
  o.master_addr = args.master_addr;
  o.master_port = args.master_port;
  o.grace_s = std::min(60.0, config.GetFloat("dist.timeout_s"));
  fs::path store;
  if (args.nnodes == 1) {
    // One host: rendezvous through a fresh file in a private directory.
    const fs::path rdv = dir / ".rendezvous";
    fs::create_directories(rdv);
    fs::permissions(rdv, fs::perms::owner_all, fs::perm_options::replace);
    store = rdv / fmt::format("store-{}", ::getpid());
    // This launcher holds the run's lock: a store file left here is a
    // killed launcher's, and no rank will read it again.
    for (const auto& stale : fs::directory_iterator(rdv)) fs::remove(stale.path());
    o.extra_env.emplace_back("TOPSPIN_RENDEZVOUS_FILE", store.string());
  }
  const SpawnResult r = SpawnAndSupervise(o);
  if (!store.empty()) fs::remove(store);
  if (r.exit_code != 0 && r.failed_rank < 0) {
    // SIGINT/SIGTERM: forwarded, the ranks checkpointed and stopped.
    fmt::print("{}: the ranks stopped after a checkpoint; continue with --resume auto\n",
               r.cause);
    throw ExitRequest(r.exit_code);
  }
  if (r.exit_code != 0) {
    throw Error(ErrorKind::kDist, fmt::format("the job failed: {}", r.cause), {.field = "--nproc"},
                "the first failing rank's own error is printed above it");
  }
}

#ifdef TOPSPIN_HAVE_TORCH
RendezvousOptions RendezvousFor(const Config& config) {
  RendezvousOptions o;
  o.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(config.GetFloat("dist.timeout_s") * 1000.0));
  if (const char* f = std::getenv("TOPSPIN_RENDEZVOUS_FILE"); f != nullptr && *f) o.file_store = f;
  if (const char* t = std::getenv("TOPSPIN_JOB_TOKEN"); t != nullptr && *t) {
    o.token = t;
  } else if (const std::string& file = config.GetString("dist.token_file"); !file.empty()) {
    o.token = std::string(Trim(ReadFile(file)));
  }
  return o;
}
#endif

void RunTrain(const TrainArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const Config config = Config::Load(args.path, args.overrides, TopspinSchema());
  SetLogLevel(config.GetString("run.log_level"));
  const LaunchEnv env = DetectLaunchEnv();
  if (!args.resume.empty() && args.run_dir.empty() && args.resume == "auto") {
    throw Error(ErrorKind::kUsage,
                "--resume auto needs --run-dir: the run whose checkpoints to continue",
                {.field = "--resume"}, "pass the run directory printed when the run started");
  }
  if (args.extend && args.resume.empty()) {
    throw Error(ErrorKind::kUsage, "--extend continues a run: it needs --resume",
                {.field = "--extend"},
                "pass --resume auto --run-dir RUN --extend --set train.steps=N");
  }
  if (!args.init_from.empty() && !args.resume.empty()) {
    throw Error(ErrorKind::kUsage,
                "--init-from starts a new run from a checkpoint's weights; --resume continues one",
                {.field = "--init-from"},
                "drop --resume to fine-tune from the checkpoint, or drop --init-from to continue "
                "the run");
  }
  if (!args.init_from.empty() && !fs::is_directory(args.init_from)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} is not a directory", args.init_from),
                {.file = args.init_from, .field = "--init-from"},
                "pass a run directory (its newest checkpoint) or a checkpoints/step-N directory");
  }
  if (args.nnodes > 1 && args.run_dir.empty()) {
    throw Error(ErrorKind::kUsage, "a job over several hosts needs --run-dir", {.field = "--run-dir"},
                "pass the same --run-dir (on a shared filesystem) on every host");
  }
  const bool is_rank = std::getenv("TOPSPIN_SPAWNED") != nullptr || env.launcher != Launcher::kLocal;
  const int nproc = args.nproc > 0 ? args.nproc : static_cast<int>(config.GetInt("dist.nproc"));
  if (!is_rank && (nproc > 1 || args.nnodes > 1)) return Launch(args, config, nproc);
  if (env.world_size > 1 && args.run_dir.empty()) {
    throw Error(ErrorKind::kUsage,
                fmt::format("rank {} of a {} job has no --run-dir", env.rank, env.name),
                {.field = "--run-dir"},
                "pass --run-dir DIR (a path every rank can reach) to every rank");
  }
  if (env.world_size > 1) {
    std::string world = Describe(env);
    if (std::getenv("TOPSPIN_SPAWNED") != nullptr) world.replace(0, env.name.size(), "topspin");
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    fmt::print("rank {}: {} (gloo, {})\n", env.rank, world,
               std::getenv("TOPSPIN_RENDEZVOUS_FILE")      ? "file store"
               : agent != nullptr && std::string(agent) == "True" ? "tcp store: torchrun's agent store"
                                                                  : "tcp store");
    std::fflush(stdout);
  }
  // A rank our launcher spawned runs under the launcher's lock.
  const PreparedRun run =
      env.rank == 0 ? PrepareRunDir(args, config, std::getenv("TOPSPIN_SPAWNED") == nullptr)
                    : PreparedRun{.dir = args.run_dir};
  const fs::path& dir = run.dir;
  if (!is_rank) fmt::print("run directory {}\n", dir.string());
  std::fflush(stdout);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  RankerTrainResult r;
  try {
    r = TrainRanker(config, {.run_dir = dir,
                             .resume = args.resume,
                             .extend = args.extend,
                             .init_from = args.init_from,
                             .stop_requested = [] { return g_stop_signal.load() != 0; },
                             .launch = env,
                             .rendezvous = RendezvousFor(config)});
  } catch (const Error&) {
    // A numbered directory made for this start and failed before it held
    // anything of the run's (a bad path, a model too big) is clutter.
    if (env.rank == 0 && args.run_dir.empty() && !fs::exists(dir / "checkpoints") &&
        !fs::exists(dir / "metrics.jsonl")) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
    throw;
  }
  // A run stopped by a signal exits 128 + the signal (130 SIGINT, 143
  // SIGTERM) after its checkpoint, so scripts and launchers do not take it
  // for a finished run; a rank stopped because another rank was signalled
  // exits as if terminated (143).
  const int stop_signal = g_stop_signal.load() != 0 ? g_stop_signal.load() : SIGTERM;
  if (env.rank != 0) {  // rank 0 reports for the job
    if (r.stopped) throw ExitRequest(128 + stop_signal);
    return;
  }
  if (r.stopped) fmt::print("stopped       at step {} by a signal, after a checkpoint\n", r.step);
  if (r.resumed_from >= 0 && r.resumed_from == r.step) {
    fmt::print("trained       nothing: the run had already finished its {} steps ({}); to train "
               "on, raise train.steps and add --extend\n",
               r.step, r.checkpoint.string());
    return;
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
  if (r.stopped) {
    fmt::print("continue      with --resume auto --run-dir {}\n", dir.string());
    std::fflush(stdout);
    throw ExitRequest(128 + stop_signal);
  }
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
  cmd->add_option("--run-dir", args.run_dir,
                  "write into this directory (default: a new "
                  "<run.dir>/<run.name>-NNN)");
  cmd->add_option("--resume", args.resume,
                  "auto: continue the newest complete checkpoint of --run-dir; or a step-N dir");
  cmd->add_flag("--extend", args.extend,
               "with --resume: train a run on past its train.steps (raise it with --set "
               "train.steps=N); the schedule becomes the one over the new steps");
  cmd->add_option("--init-from", args.init_from,
                  "start a new run from this checkpoint's weights (a run dir or step-N dir); "
                  "optimizer state, step and schedule start fresh");
  cmd->add_option("--nproc", args.nproc, "ranks on this host (default dist.nproc)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nnodes", args.nnodes, "hosts in the job (run this command on each)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank", args.node_rank, "this host's index, 0 .. nnodes-1")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--master-addr", args.master_addr, "host of rank 0 (several hosts)")
      ->capture_default_str();
  cmd->add_option("--master-port", args.master_port, "rendezvous port on --master-addr")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->callback([] { RunTrain(args); });
}

}  // namespace topspin::cli
