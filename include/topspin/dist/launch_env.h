// Launch environment: which launcher started this process, and where the
// process sits in the job (rank, node, master address).
//
// DetectLaunchEnv reads environment variables through an EnvLookup, so tests
// and callers can pass a map instead of the real environment. Launchers are
// tried in this order; the first whose trigger variable is set wins:
//
//   torchrun   RANK                  (also plain RANK/WORLD_SIZE set by hand
//                                     and processes spawned by topspin)
//   OpenMPI    OMPI_COMM_WORLD_RANK
//   SLURM      SLURM_PROCID
//   SageMaker  SM_HOSTS
//   local      none of them: rank 0 of 1
//
// What each launcher maps to (defaults in brackets):
//
//   torchrun   RANK, WORLD_SIZE (required), LOCAL_RANK [RANK],
//              LOCAL_WORLD_SIZE [WORLD_SIZE], GROUP_RANK [0],
//              GROUP_WORLD_SIZE [ceil(WORLD_SIZE / LOCAL_WORLD_SIZE)]
//   OpenMPI    OMPI_COMM_WORLD_RANK, _SIZE (required), _LOCAL_RANK [rank],
//              _LOCAL_SIZE [size]; ranks are assumed placed node by node
//              (mpirun's default), so node_rank = rank / local size.
//              MASTER_ADDR is required when the job spans several nodes.
//   SLURM      SLURM_PROCID, SLURM_NTASKS (required), SLURM_LOCALID [0],
//              SLURM_NODEID [0], SLURM_NNODES [1]; processes on this node
//              from SLURM_NTASKS_PER_NODE, else this node's entry of
//              SLURM_TASKS_PER_NODE ("4(x2),3"), else NTASKS / NNODES;
//              master = first host of SLURM_JOB_NODELIST, else SLURM_NODELIST.
//   SageMaker  SM_HOSTS (JSON list), SM_CURRENT_HOST (required, one of
//              SM_HOSTS); processes per host = SM_NUM_GPUS when > 0, else
//              SM_NUM_CPUS [1]. SageMaker starts one process per host, so
//              the result describes local rank 0 of this host: the spawner
//              derives the others. master = first host of SM_HOSTS.
//
// For every launcher MASTER_ADDR and MASTER_PORT, when set, override the
// master address and port (default 127.0.0.1:29500). A variable set to an
// empty (or all-blank) value counts as unset. Malformed values throw
// topspin::Error of kind kDist, with ErrorWhere::field naming the variable
// and a hint naming the launcher that set it and what to fix.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/dist/slurm_nodelist.h"  // SLURM host list and tasks-per-node parsing

namespace topspin {

enum class Launcher { kLocal, kTorchrun, kSlurm, kOpenMpi, kSageMaker };

// "local", "torchrun", "slurm", "openmpi", "sagemaker".
const char* LauncherName(Launcher launcher);

inline constexpr int kDefaultMasterPort = 29500;
inline constexpr const char* kDefaultMasterAddr = "127.0.0.1";

// Where this process sits in the job. Invariants after DetectLaunchEnv:
// 0 <= rank < world_size, 0 <= local_rank < local_world_size <= world_size,
// 0 <= node_rank < num_nodes, 1 <= master_port <= 65535.
struct LaunchEnv {
  Launcher launcher = Launcher::kLocal;
  std::string name = "local";                    // LauncherName(launcher)
  int rank = 0;                                  // global rank
  int world_size = 1;                            // processes in the job
  int local_rank = 0;                            // rank among the processes of this node
  int local_world_size = 1;                      // processes on this node
  int node_rank = 0;                             // index of this node
  int num_nodes = 1;                             // nodes in the job
  std::string master_addr = kDefaultMasterAddr;  // host of rank 0
  int master_port = kDefaultMasterPort;          // rendezvous port on master_addr
};

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// An EnvLookup over the real process environment (std::getenv). Not safe to
// call while another thread calls setenv/putenv.
EnvLookup ProcessEnvLookup();

// Detects the launcher and the process's place in the job (see the top of
// this file). Throws topspin::Error (kDist) on malformed values.
LaunchEnv DetectLaunchEnv(const EnvLookup& env);
// Same, reading the real process environment.
LaunchEnv DetectLaunchEnv();

// One line, e.g. "torchrun: rank 5/8, local 1/4, node 1/2, master 10.0.0.1:29500".
std::string Describe(const LaunchEnv& env);

}  // namespace topspin
