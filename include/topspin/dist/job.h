// The job layer of `topspin train`: which role this process plays in a job,
// the run directory and its lock, the launcher that spawns and supervises
// this host's ranks, the rendezvous settings from the environment, and the
// stop signals. Torch-free: the CLI calls it, and the trainer runs in the
// process it names a rank (or the single process of a one-process run).
//
//   const JobPlan plan = PlanJob(args, config);          // Error{kUsage} on bad flags
//   if (plan.role == JobRole::kLauncher) return LaunchJob(args, config, plan.nproc);
//   const PreparedRun run = PrepareRun(args, config, plan);
//   InstallStopSignals();
//   TrainRanker(config, {.run_dir = run.dir, .stop_requested = StopRequested, ...});
//
// Roles. A process started by our launcher (TOPSPIN_SPAWNED), torchrun,
// srun, mpirun or SageMaker is a rank (topspin/dist/launch_env.h). Any other
// process is the launcher when the job has more than one rank on this host
// or more than one host (--nproc, dist.nproc, --nnodes), else the single
// process of the run.
//
// Run directory. Without --run-dir, a new numbered <run.dir>/<run.name>-NNN
// holds the resolved config.yaml. With it, config.yaml is written unless
// the run is resumed and already has one (a refused resume must not
// overwrite it). The process that owns the run on node 0 (the launcher, or
// the single process) holds the directory's lock (core/run_dir.h); ranks
// our launcher spawned run under it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "topspin/core/config.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/run_dir.h"
#include "topspin/dist/launch_env.h"
#include "topspin/dist/rendezvous.h"

namespace topspin {

// The job options of `topspin train` (its flags).
struct JobArgs {
  std::string run_dir;  // empty: a new numbered run directory
  std::string resume;   // "", "auto" or a checkpoint directory
  int nproc = 0;        // ranks on this host; 0: dist.nproc
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = kDefaultMasterAddr;
  int master_port = kDefaultMasterPort;
};

enum class JobRole {
  kSingle,    // the one process of the run
  kLauncher,  // spawns and supervises this host's ranks
  kRank,      // one rank of a job (started by our launcher or another)
};

struct JobPlan {
  JobRole role = JobRole::kSingle;
  LaunchEnv env;  // DetectLaunchEnv()
  int nproc = 1;  // ranks on this host (the launcher spawns them)
};

// The role of this process, from the environment and `args`; Error{kUsage}
// naming the flag for combinations that cannot work (--resume auto without
// --run-dir, several hosts or ranks of another launcher without one).
JobPlan PlanJob(const JobArgs& args, const DistConfig& dist);

// The run's directory, and its lock when this process owns the run.
struct PreparedRun {
  std::filesystem::path dir;
  std::unique_ptr<RunDirLock> lock;
};

// For kSingle and rank 0 of a kRank job: the directory made or checked and
// config.yaml written (see above); other ranks get --run-dir as it is.
PreparedRun PrepareRun(const JobArgs& args, const Config& config, const JobPlan& plan);

// The launcher: locks and prepares the run directory, prints it, spawns
// `nproc` ranks of this host running this process's command line (launch
// flags dropped, --run-dir added) with a private rendezvous file on one
// host, supervises them (topspin/dist/spawn.h) and returns 0 when all
// finished. A job stopped by SIGINT/SIGTERM (forwarded to the ranks, which
// checkpoint) returns 128 + the signal after saying how to continue; a
// failed rank is Error{kDist} naming it.
int LaunchJob(const JobArgs& args, const Config& config, int nproc);

// This process's command line for a rank: our argv without the launch
// flags (--nproc, --nnodes, --node-rank, --master-addr, --master-port,
// --run-dir, in either "--flag value" or "--flag=value" form), then
// --run-dir `run_dir`; argv[0] is /proc/self/exe resolved. `own` defaults
// to /proc/self/cmdline.
std::vector<std::string> RankCommandLine(const std::filesystem::path& run_dir,
                                         std::vector<std::string> own = {});

// The rendezvous of a rank: dist.timeout_s, the launcher's rendezvous file
// (TOPSPIN_RENDEZVOUS_FILE), and the job token (TOPSPIN_JOB_TOKEN, else
// the file dist.token_file names).
RendezvousOptions RendezvousFromEnvironment(const DistConfig& dist);

// SIGINT and SIGTERM ask the run to checkpoint and stop; a second one
// kills (the default disposition is restored by the first).
void InstallStopSignals();
bool StopRequested();
// The signal that asked, or 0.
int StopSignal();

}  // namespace topspin
