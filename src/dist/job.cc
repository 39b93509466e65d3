#include "topspin/dist/job.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"
#include "topspin/dist/spawn.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_stop_signal{0};

void OnStopSignal(int sig) {
  g_stop_signal.store(sig);
  std::signal(sig, SIG_DFL);
}

std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

bool Spawned() { return std::getenv("TOPSPIN_SPAWNED") != nullptr; }

PreparedRun MakeRunDir(const JobArgs& args, const Config& config, bool lock) {
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

}  // namespace

JobPlan PlanJob(const JobArgs& args, const DistConfig& dist) {
  JobPlan plan;
  plan.env = DetectLaunchEnv();
  if (args.resume == "auto" && args.run_dir.empty()) {
    throw Error(ErrorKind::kUsage,
                "--resume auto needs --run-dir: the run whose checkpoints to continue",
                {.field = "--resume"}, "pass the run directory printed when the run started");
  }
  if (args.nnodes > 1 && args.run_dir.empty()) {
    throw Error(ErrorKind::kUsage, "a job over several hosts needs --run-dir", {.field = "--run-dir"},
                "pass the same --run-dir (on a shared filesystem) on every host");
  }
  plan.nproc = args.nproc > 0 ? args.nproc : static_cast<int>(dist.nproc);
  const bool is_rank = Spawned() || plan.env.launcher != Launcher::kLocal;
  if (!is_rank) {
    plan.role = plan.nproc > 1 || args.nnodes > 1 ? JobRole::kLauncher : JobRole::kSingle;
    return plan;
  }
  plan.role = JobRole::kRank;
  if (plan.env.world_size > 1 && args.run_dir.empty()) {
    throw Error(ErrorKind::kUsage,
                fmt::format("rank {} of a {} job has no --run-dir", plan.env.rank, plan.env.name),
                {.field = "--run-dir"},
                "pass --run-dir DIR (a path every rank can reach) to every rank");
  }
  return plan;
}

PreparedRun PrepareRun(const JobArgs& args, const Config& config, const JobPlan& plan) {
  // A rank our launcher spawned runs under the launcher's lock.
  if (plan.env.rank != 0) return PreparedRun{.dir = args.run_dir};
  return MakeRunDir(args, config, /*lock=*/!Spawned());
}

std::vector<std::string> RankCommandLine(const fs::path& run_dir, std::vector<std::string> own) {
  const std::vector<std::string> in = own.empty() ? OwnCommandLine() : std::move(own);
  std::vector<std::string> out = {"/proc/self/exe"};
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

int LaunchJob(const JobArgs& args, const Config& config, int nproc) {
  const PreparedRun run = MakeRunDir(args, config, /*lock=*/args.node_rank == 0);
  const fs::path& dir = run.dir;
  std::printf("run directory %s\n", dir.string().c_str());
  std::fflush(stdout);
  SpawnOptions o;
  o.argv = RankCommandLine(dir);
  o.nproc = nproc;
  o.node_rank = args.node_rank;
  o.nnodes = args.nnodes;
  o.master_addr = args.master_addr;
  o.master_port = args.master_port;
  o.grace_s = std::min(60.0, DistConfig::From(config).timeout_s);
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
    std::printf("%s: the ranks stopped after a checkpoint; continue with --resume auto\n",
                r.cause.c_str());
    std::fflush(stdout);
    return r.exit_code;
  }
  if (r.exit_code != 0) {
    throw Error(ErrorKind::kDist, fmt::format("the job failed: {}", r.cause), {.field = "--nproc"},
                "the first failing rank's own error is printed above it");
  }
  return 0;
}

RendezvousOptions RendezvousFromEnvironment(const DistConfig& dist) {
  RendezvousOptions o;
  o.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(dist.timeout_s * 1000.0));
  if (const char* f = std::getenv("TOPSPIN_RENDEZVOUS_FILE"); f != nullptr && *f) o.file_store = f;
  if (const char* t = std::getenv("TOPSPIN_JOB_TOKEN"); t != nullptr && *t) {
    o.token = t;
  } else if (const std::string& file = dist.token_file; !file.empty()) {
    o.token = std::string(Trim(ReadFile(file)));
  }
  return o;
}

void InstallStopSignals() {
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

bool StopRequested() { return g_stop_signal.load() != 0; }

int StopSignal() { return g_stop_signal.load(); }

}  // namespace topspin
