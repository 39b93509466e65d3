// Local-rank launcher: `topspin train CONFIG --nproc N` starts N ranks on this
// node with SpawnAndSupervise and watches them until every one has exited.
//
// Environment. Local rank i on node k runs with the launcher's environment
// plus these variables (the ones torchrun sets, so DetectLaunchEnv in
// launch_env.h reads them back in the rank):
//
//   RANK              k * nproc + i        (global rank)
//   WORLD_SIZE        nnodes * nproc
//   LOCAL_RANK        i
//   LOCAL_WORLD_SIZE  nproc
//   GROUP_RANK        k                    (node_rank)
//   GROUP_WORLD_SIZE  nnodes
//   MASTER_ADDR       master_addr
//   MASTER_PORT       master_port
//   TOPSPIN_SPAWNED   1
//
// and then extra_env, applied last (it may override any of the above).
//
// Failure policy. A rank that exits with a non-zero status or dies by a
// signal fails the job: every other rank still running gets SIGTERM, and
// SIGKILL once grace_s has passed. The result names the first rank that
// failed; ranks that exit after being stopped are not reported. A rank that
// exits 0 early is not a failure: the others keep running.
//
// Signal policy. For the duration of the call the launcher catches SIGINT,
// SIGTERM and SIGCHLD (the previous dispositions are restored before it
// returns; ranks start with the previous ones). A SIGINT or SIGTERM sent to
// the launcher is forwarded to every rank as SIGTERM so ranks can checkpoint
// and exit; ranks still alive grace_s later get SIGKILL. Another SIGINT or
// SIGTERM while ranks are being stopped SIGKILLs them at once. Ranks stay in
// the launcher's process group, so a terminal's Ctrl-C also reaches them
// directly as SIGINT. Every rank runs with PR_SET_PDEATHSIG = SIGKILL, so no
// rank outlives a launcher that dies (Linux sends it when the thread that
// called SpawnAndSupervise exits; that thread is inside the call until every
// rank is reaped). Processes a rank starts itself are its own to stop.
//
// Output. Global rank 0 shares the launcher's stdin, stdout and stderr.
// Other ranks share stdin; with prefix_output their stdout and stderr pass
// through pipes and reach the launcher's fds 1 and 2 line by line as
// "[rank R] <line>" (see LinePrefixer); without it they share the fds too.
//
// Threads. At most one call may run at a time in a process (it owns the
// process-wide signal dispositions); a concurrent second call throws
// Error{kInternal}. The call reads `environ`: no other thread may call
// setenv/putenv while it starts the ranks. Linux only (prctl).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topspin {

struct SpawnOptions {
  // What every rank runs. argv[0] is the executable: a path when it contains
  // '/', else looked up on the launcher's PATH. Must not be empty.
  std::vector<std::string> argv;
  int nproc = 1;                                               // ranks on this node, >= 1
  int node_rank = 0;                                           // this node's index, in [0, nnodes)
  int nnodes = 1;                                              // nodes in the job, >= 1
  std::string master_addr = "127.0.0.1";                       // host of global rank 0
  int master_port = 29500;                                     // in [1, 65535]
  std::vector<std::pair<std::string, std::string>> extra_env;  // set in every rank, last
  // After the first failure or a forwarded signal: seconds the ranks get to
  // exit after SIGTERM before SIGKILL. >= 0.
  double grace_s = 30;
  // Ranks other than global rank 0 get their stdout/stderr lines prefixed
  // "[rank R] ".
  bool prefix_output = true;
};

struct SpawnResult {
  // 0 when every rank exited 0. Otherwise the first failing rank's exit
  // status, or 128 + signal when it died by a signal; 128 + signal (130 for
  // SIGINT, 143 for SIGTERM) when the launcher was stopped by a signal.
  int exit_code = 0;
  int failed_rank = -1;  // global rank of the first rank that failed; -1 if none
  // Empty on success, else one of:
  //   "rank 1 exited with status 3"
  //   "rank 1 was killed by signal 9 (Killed)"
  //   "stopped by SIGINT" / "stopped by SIGTERM"
  std::string cause;
};

// Starts options.nproc ranks and supervises them (policies at the top of this
// file). Returns once every rank has exited and been reaped; no process it
// started is left behind. Throws topspin::Error of kind kDist when the
// options are invalid (ErrorWhere::field names the option) or a rank cannot
// be started ("cannot start rank 1: /x/y: No such file or directory"); ranks
// already started are then SIGKILLed and reaped before the throw.
SpawnResult SpawnAndSupervise(const SpawnOptions& options);

// The variables SpawnAndSupervise adds to local rank `local_rank`'s
// environment, in the order of the table above, followed by extra_env.
std::vector<std::pair<std::string, std::string>> SpawnedRankEnv(const SpawnOptions& options,
                                                                int local_rank);

// Turns a byte stream into whole lines, each prefixed: what the launcher does
// with the output of ranks other than 0. Not thread-safe; one per stream.
class LinePrefixer {
 public:
  // A partial line this long is emitted as a line of its own, so output
  // without newlines (progress bars drawn with '\r') cannot grow unbounded.
  static constexpr size_t kMaxLine = size_t{64} * 1024;

  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // The complete lines in `chunk` (with what earlier chunks left over), each
  // as prefix + line + '\n'. Keeps the trailing partial line.
  std::string Feed(std::string_view chunk);
  // The partial line kept so far, as prefix + line + '\n'; "" when none.
  std::string Finish();

 private:
  void EmitPartial(std::string& out);

  std::string prefix_;
  std::string partial_;
};

}  // namespace topspin
