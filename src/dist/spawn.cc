#include "topspin/dist/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"

extern char** environ;

namespace topspin {
namespace {

using Clock = std::chrono::steady_clock;

// SIGCHLD wakes the loop at once; this only bounds the wait if it is missed.
constexpr std::chrono::milliseconds kMaxPollWait{250};
constexpr size_t kReadChunk = size_t{64} * 1024;

// ---------------------------------------------------------------------------
// Small RAII pieces.

// A file descriptor, closed on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
};

// A null-terminated char* array over owned strings, as execve wants. Not
// copyable or movable: the pointers point into strings_.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  CStringArray(const CStringArray&) = delete;
  CStringArray& operator=(const CStringArray&) = delete;

  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

Error DistError(std::string what, std::string field = {}, std::string hint = {}) {
  ErrorWhere where;
  where.field = std::move(field);
  return Error(ErrorKind::kDist, std::move(what), std::move(where), std::move(hint));
}

Error StartError(int rank, const std::string& what, std::string hint) {
  return DistError(fmt::format("cannot start rank {}: {}", rank, what), {}, std::move(hint));
}

Pipe MakePipe(int rank) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw StartError(rank, fmt::format("pipe failed: {}", std::strerror(errno)),
                     "the launcher ran out of file descriptors; raise `ulimit -n`");
  }
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

// Writes all of `text` to `fd`; gives up silently if the fd is gone.
void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// ---------------------------------------------------------------------------
// Signals: while a call runs, SIGINT, SIGTERM and SIGCHLD each become one
// byte (the signal number) on the wake pipe, read by the supervision loop.

std::atomic<int> g_wake_fd{-1};  // write end of the wake pipe; -1 when no call runs
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free int");

void OnLauncherSignal(int sig) {
  const int saved_errno = errno;
  const int fd = g_wake_fd.load();
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t ignored = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

// Installs the launcher's handlers; restores the previous ones on
// destruction. At most one exists per process.
class SignalScope {
 public:
  explicit SignalScope(int wake_fd) {
    int expected = -1;
    if (!g_wake_fd.compare_exchange_strong(expected, wake_fd)) {
      throw InternalError("SpawnAndSupervise called while another call is running");
    }
    struct sigaction action {};
    action.sa_handler = OnLauncherSignal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      action.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
      ::sigaction(kSignals[i], &action, &old_[i]);
    }
  }
  ~SignalScope() {
    RestoreInChild();
    g_wake_fd.store(-1);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Puts back the previous dispositions. Async-signal-safe, so a forked
  // child calls it too.
  void RestoreInChild() const {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGCHLD};
  std::array<struct sigaction, 3> old_{};
};

// Blocks every signal in the calling thread for its lifetime, so no handler
// runs in a child between fork and exec.
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~SignalBlock() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t old_;
};

const char* StopSignalName(int sig) {
  return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

// ---------------------------------------------------------------------------
// Starting a rank.

// argv[0] as execve wants it: unchanged when it holds a '/', else the first
// executable match on the launcher's PATH.
std::string ResolveExecutable(const std::string& name, int rank) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : Split(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  throw StartError(rank, fmt::format("{}: not found on PATH", name),
                   "give the executable's full path, or add its directory to PATH");
}

// The rank's whole environment as "NAME=value" strings: the launcher's, with
// the spawned variables replacing any of the same name (the last wins).
std::vector<std::string> RankEnvironment(const SpawnOptions& options, int local_rank) {
  const auto vars = SpawnedRankEnv(options, local_rank);
  const auto overridden_later = [&](std::string_view name, size_t from) {
    for (size_t i = from; i < vars.size(); ++i) {
      if (vars[i].first == name) return true;
    }
    return false;
  };
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (!overridden_later(text.substr(0, text.find('=')), 0)) env.emplace_back(text);
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!overridden_later(vars[i].first, i + 1)) {
      env.push_back(vars[i].first + "=" + vars[i].second);
    }
  }
  return env;
}

// What a child reports on its error pipe when it cannot exec.
enum class ChildStage : int { kParentDeathSignal, kRedirect, kExec };
struct ChildFailure {
  ChildStage stage;
  int errnum;
};

// Everything a child needs, prepared before fork: between fork and exec the
// child may only make async-signal-safe calls.
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  int stdout_fd;  // dup2'd onto fd 1 when >= 0
  int stderr_fd;  // dup2'd onto fd 2 when >= 0
  int error_fd;   // write end of the error pipe (close-on-exec)
  pid_t launcher_pid;
};

[[noreturn]] void FailChild(int error_fd, ChildStage stage, int errnum) {
  const ChildFailure failure{stage, errnum};
  [[maybe_unused]] const ssize_t ignored = ::write(error_fd, &failure, sizeof failure);
  ::_exit(127);
}

[[noreturn]] void RunChild(const ChildPlan& plan, const SignalScope& signals,
                           const sigset_t& mask) {
  signals.RestoreInChild();
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    FailChild(plan.error_fd, ChildStage::kParentDeathSignal, errno);
  }
  if (::getppid() != plan.launcher_pid) ::_exit(128 + SIGKILL);  // launcher died before prctl
  if ((plan.stdout_fd >= 0 && ::dup2(plan.stdout_fd, STDOUT_FILENO) < 0) ||
      (plan.stderr_fd >= 0 && ::dup2(plan.stderr_fd, STDERR_FILENO) < 0)) {
    FailChild(plan.error_fd, ChildStage::kRedirect, errno);
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execve(plan.path, plan.argv, plan.envp);
  FailChild(plan.error_fd, ChildStage::kExec, errno);
}

// Blocks until the child has exec'd (nullopt) or reported why it could not.
std::optional<ChildFailure> ReadChildFailure(const Fd& error_read) {
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(error_read.get(), &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof failure)) return failure;
  return std::nullopt;
}

std::string DescribeChildFailure(const ChildFailure& failure, const std::string& path) {
  const char* reason = std::strerror(failure.errnum);
  switch (failure.stage) {
    case ChildStage::kParentDeathSignal:
      return fmt::format("prctl(PR_SET_PDEATHSIG) failed: {}", reason);
    case ChildStage::kRedirect: return fmt::format("redirecting its output failed: {}", reason);
    case ChildStage::kExec: break;
  }
  return fmt::format("{}: {}", path, reason);
}

std::string DescribeExit(int rank, int status) {
  if (WIFEXITED(status)) {
    return fmt::format("rank {} exited with status {}", rank, WEXITSTATUS(status));
  }
  const int sig = WTERMSIG(status);
  return fmt::format("rank {} was killed by signal {} ({})", rank, sig, ::strsignal(sig));
}

void Validate(const SpawnOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) {
    throw DistError("no command given for the ranks to run", "argv", "this is a bug in the caller");
  }
  if (o.nproc < 1) {
    throw DistError(fmt::format("nproc must be at least 1, got {}", o.nproc), "nproc",
                    "pass --nproc N with N >= 1, usually the number of GPUs on this node");
  }
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw DistError(fmt::format("node_rank {} is not in [0, nnodes = {})", o.node_rank, o.nnodes),
                    "node_rank", "number the nodes 0 .. nnodes - 1");
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    throw DistError(fmt::format("master_port {} is not in [1, 65535]", o.master_port),
                    "master_port", "pick a free TCP port, e.g. 29500");
  }
  if (!(o.grace_s >= 0) || !std::isfinite(o.grace_s)) {
    throw DistError(fmt::format("grace_s must be a finite number >= 0, got {}", o.grace_s),
                    "grace_s", "give ranks a few seconds to checkpoint, e.g. 30");
  }
}

// ---------------------------------------------------------------------------
// Supervision.

// One prefixed output stream (stdout or stderr) of a rank.
struct RankOutput {
  Fd fd;       // non-blocking read end; invalid after EOF
  int target;  // STDOUT_FILENO or STDERR_FILENO
  LinePrefixer lines;
};

struct RankProcess {
  int global_rank = 0;
  pid_t pid = -1;
  bool running = false;             // started and not yet reaped
  std::vector<RankOutput> outputs;  // empty when it shares the launcher's fds
};

class Supervisor {
 public:
  Supervisor(const SpawnOptions& options, Fd wake_read)
      : options_(options),
        path_(ResolveExecutable(options.argv[0], options.node_rank * options.nproc)),
        argv_(options.argv),
        wake_(std::move(wake_read)),
        buffer_(kReadChunk) {}
  // SIGKILLs and reaps whatever still runs (only when an exception escapes).
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void StartAll(const SignalScope& signals);
  SpawnResult Supervise();

 private:
  void StartRank(int local_rank, const SignalScope& signals);
  void AddOutput(RankProcess& rank, Fd read_end, int target);
  void HandleWakeups();
  void OnStopSignal(int sig);
  void ReapExited();
  void OnRankExit(const RankProcess& rank, int status);
  void RecordFailure(int rank, int exit_code, std::string cause);
  void BeginStop();
  void SignalRunning(int sig);
  void KillIfGraceOver();
  void WaitForEvents();
  std::chrono::milliseconds PollTimeout() const;
  bool ForwardChunk(RankOutput& output);
  void DrainOutputs();
  bool AnyRunning() const;

  const SpawnOptions& options_;
  const std::string path_;
  const CStringArray argv_;
  Fd wake_;
  std::vector<char> buffer_;  // reads of rank output
  std::vector<RankProcess> ranks_;
  SpawnResult result_;
  bool stopping_ = false;  // SIGTERM sent to the ranks
  bool killed_ = false;    // SIGKILL sent to the ranks
  Clock::time_point kill_at_{};
};

Supervisor::~Supervisor() {
  for (RankProcess& rank : ranks_) {
    if (!rank.running) continue;
    ::kill(rank.pid, SIGKILL);
    while (::waitpid(rank.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void Supervisor::StartAll(const SignalScope& signals) {
  ranks_.reserve(static_cast<size_t>(options_.nproc));
  for (int local = 0; local < options_.nproc; ++local) StartRank(local, signals);
}

void Supervisor::StartRank(int local_rank, const SignalScope& signals) {
  const int global = options_.node_rank * options_.nproc + local_rank;
  const bool piped = options_.prefix_output && global != 0;
  const CStringArray env(RankEnvironment(options_, local_rank));
  Pipe error = MakePipe(global);
  Pipe out = piped ? MakePipe(global) : Pipe{};
  Pipe err = piped ? MakePipe(global) : Pipe{};
  const ChildPlan plan{path_.c_str(),   argv_.get(),       env.get(), out.write.get(),
                       err.write.get(), error.write.get(), ::getpid()};
  pid_t pid;
  {
    const SignalBlock block;
    pid = ::fork();
    if (pid == 0) RunChild(plan, signals, block.old_mask());
  }
  if (pid < 0) {
    throw StartError(global, fmt::format("fork failed: {}", std::strerror(errno)),
                     "the system is out of processes or memory; check `ulimit -u` and free memory");
  }
  RankProcess& rank = ranks_.emplace_back(
      RankProcess{.global_rank = global, .pid = pid, .running = true, .outputs = {}});
  error.write.Reset();
  if (const std::optional<ChildFailure> failure = ReadChildFailure(error.read)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    rank.running = false;
    throw StartError(global, DescribeChildFailure(*failure, path_),
                     fmt::format("the ranks run \"{}\"; check that {} exists and is executable",
                                 Join(options_.argv, " "), path_));
  }
  if (!piped) return;
  AddOutput(rank, std::move(out.read), STDOUT_FILENO);
  AddOutput(rank, std::move(err.read), STDERR_FILENO);
}

void Supervisor::AddOutput(RankProcess& rank, Fd read_end, int target) {
  ::fcntl(read_end.get(), F_SETFL, ::fcntl(read_end.get(), F_GETFL) | O_NONBLOCK);
  rank.outputs.push_back(RankOutput{std::move(read_end), target,
                                    LinePrefixer(fmt::format("[rank {}] ", rank.global_rank))});
}

SpawnResult Supervisor::Supervise() {
  while (true) {
    HandleWakeups();  // before reaping, so a stop signal is seen before the deaths it caused
    ReapExited();
    if (!AnyRunning()) break;
    KillIfGraceOver();
    WaitForEvents();
  }
  DrainOutputs();
  return result_;
}

// Reads the wake pipe (non-blocking) and acts on stop signals.
void Supervisor::HandleWakeups() {
  std::array<unsigned char, 64> bytes;
  ssize_t n;
  while ((n = ::read(wake_.get(), bytes.data(), bytes.size())) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) {
      if (bytes[i] == SIGINT || bytes[i] == SIGTERM) OnStopSignal(bytes[i]);
    }
  }
}

void Supervisor::OnStopSignal(int sig) {
  if (stopping_) {  // asked again: no more grace
    if (!killed_) SignalRunning(SIGKILL);
    killed_ = true;
    return;
  }
  result_.exit_code = 128 + sig;
  result_.cause = fmt::format("stopped by {}", StopSignalName(sig));
  BeginStop();
}

void Supervisor::ReapExited() {
  for (RankProcess& rank : ranks_) {
    if (!rank.running) continue;
    int status = 0;
    const pid_t done = ::waitpid(rank.pid, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) continue;
    rank.running = false;
    if (done > 0) {
      OnRankExit(rank, status);
    } else if (!stopping_) {  // ECHILD: something else in the process reaped it
      RecordFailure(rank.global_rank, 1,
                    fmt::format("rank {} was reaped elsewhere; its exit status is unknown",
                                rank.global_rank));
    }
  }
}

void Supervisor::OnRankExit(const RankProcess& rank, int status) {
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ok || stopping_) return;
  RecordFailure(rank.global_rank, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                DescribeExit(rank.global_rank, status));
}

// True when `pid` is stopped (SIGSTOP, SIGTSTP) or traced: the third
// field of /proc/<pid>/stat is T or t.
bool IsStopped(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');  // the command name may hold spaces
  return close != std::string::npos && close + 2 < stat.size() &&
         (stat[close + 2] == 'T' || stat[close + 2] == 't');
}

void Supervisor::RecordFailure(int rank, int exit_code, std::string cause) {
  // A rank that was stopped answers no collective: the others time out and
  // exit first, but the stopped one is the job's failure.
  for (const RankProcess& other : ranks_) {
    if (other.running && other.global_rank != rank && IsStopped(other.pid)) {
      cause = fmt::format("rank {} was stopped (SIGSTOP or a debugger) and stopped answering; "
                          "then {}",
                          other.global_rank, cause);
      rank = other.global_rank;
      // Stopped, it cannot act on SIGTERM: no grace to wait out.
      ::kill(other.pid, SIGKILL);
      break;
    }
  }
  result_.failed_rank = rank;
  result_.exit_code = exit_code;
  result_.cause = std::move(cause);
  BeginStop();
}

void Supervisor::BeginStop() {
  stopping_ = true;
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options_.grace_s));
  SignalRunning(SIGTERM);
}

// Ranks not yet reaped cannot have had their pid reused, so this never hits
// an unrelated process.
void Supervisor::SignalRunning(int sig) {
  for (const RankProcess& rank : ranks_) {
    if (rank.running) ::kill(rank.pid, sig);
  }
}

void Supervisor::KillIfGraceOver() {
  if (!stopping_ || killed_ || Clock::now() < kill_at_) return;
  SignalRunning(SIGKILL);
  killed_ = true;
}

std::chrono::milliseconds Supervisor::PollTimeout() const {
  if (!stopping_ || killed_) return kMaxPollWait;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at_ - Clock::now());
  return std::clamp(left, std::chrono::milliseconds(0), kMaxPollWait);
}

// Waits for a signal, rank output or the poll timeout; forwards the output.
void Supervisor::WaitForEvents() {
  std::vector<pollfd> fds = {{wake_.get(), POLLIN, 0}};
  std::vector<RankOutput*> owners;
  for (RankProcess& rank : ranks_) {
    for (RankOutput& output : rank.outputs) {
      if (!output.fd.valid()) continue;
      fds.push_back({output.fd.get(), POLLIN, 0});
      owners.push_back(&output);
    }
  }
  const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(PollTimeout().count()));
  if (ready <= 0) return;  // timeout, or EINTR: the loop checks everything again
  for (size_t i = 0; i < owners.size(); ++i) {
    if (fds[i + 1].revents != 0) ForwardChunk(*owners[i]);
  }
}

// Reads one chunk of a rank's output and writes its complete lines. Returns
// false when nothing more is available now (closing the stream at EOF).
bool Supervisor::ForwardChunk(RankOutput& output) {
  const ssize_t n = ::read(output.fd.get(), buffer_.data(), buffer_.size());
  if (n > 0) {
    WriteAll(output.target, output.lines.Feed({buffer_.data(), static_cast<size_t>(n)}));
    return true;
  }
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && errno == EAGAIN) return false;
  WriteAll(output.target, output.lines.Finish());  // EOF or a read error
  output.fd.Reset();
  return false;
}

// Once every rank is reaped: forwards what their pipes still hold, without
// waiting for EOF (a process a rank left behind may keep a pipe open).
void Supervisor::DrainOutputs() {
  for (RankProcess& rank : ranks_) {
    for (RankOutput& output : rank.outputs) {
      while (output.fd.valid() && ForwardChunk(output)) {
      }
      WriteAll(output.target, output.lines.Finish());
      output.fd.Reset();
    }
  }
}

bool Supervisor::AnyRunning() const {
  for (const RankProcess& rank : ranks_) {
    if (rank.running) return true;
  }
  return false;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SpawnedRankEnv(const SpawnOptions& options,
                                                                int local_rank) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(options.node_rank * options.nproc + local_rank)},
      {"WORLD_SIZE", std::to_string(options.nnodes * options.nproc)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(options.master_port)},
      {"TOPSPIN_SPAWNED", "1"},
  };
  vars.insert(vars.end(), options.extra_env.begin(), options.extra_env.end());
  return vars;
}

SpawnResult SpawnAndSupervise(const SpawnOptions& options) {
  Validate(options);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw DistError(fmt::format("cannot create the launcher's wake pipe: {}", std::strerror(errno)),
                    {}, "the launcher ran out of file descriptors; raise `ulimit -n`");
  }
  Fd wake_read(wake[0]);
  const Fd wake_write(wake[1]);
  const SignalScope signals(wake_write.get());  // destroyed after the supervisor
  Supervisor supervisor(options, std::move(wake_read));
  supervisor.StartAll(signals);
  return supervisor.Supervise();
}

std::string LinePrefixer::Feed(std::string_view chunk) {
  std::string out;
  for (size_t newline; (newline = chunk.find('\n')) != std::string_view::npos;) {
    partial_.append(chunk.substr(0, newline));
    EmitPartial(out);
    chunk.remove_prefix(newline + 1);
  }
  partial_.append(chunk);
  if (partial_.size() >= kMaxLine) EmitPartial(out);
  return out;
}

std::string LinePrefixer::Finish() {
  std::string out;
  if (!partial_.empty()) EmitPartial(out);
  return out;
}

void LinePrefixer::EmitPartial(std::string& out) {
  out += prefix_;
  out += partial_;
  out += '\n';
  partial_.clear();
}

}  // namespace topspin
