#include "topspin/dist/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "core/test_util.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Every rank runs `/bin/sh -c script`; a short grace keeps failing tests quick.
SpawnOptions Sh(const std::string& script, int nproc) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.nproc = nproc;
  options.grace_s = 2;
  return options;
}

// Shell that writes the rank's pid to DIR/pid.$RANK atomically.
std::string RecordPid(const testing::TempDir& dir) {
  const std::string pid = (dir / "pid.").string() + "$RANK";
  return "echo $$ > " + pid + ".tmp && mv " + pid + ".tmp " + pid + "; ";
}

// Shell that waits until DIR/pid.R exists for every R in `ranks`.
std::string AwaitPids(const testing::TempDir& dir, const std::vector<int>& ranks) {
  std::string script;
  for (int rank : ranks) {
    script += "while [ ! -f " + (dir / ("pid." + std::to_string(rank))).string() +
              " ]; do sleep 0.02; done; ";
  }
  return script;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Waits up to 10 s for `path` to exist.
bool AwaitFile(const fs::path& path) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!fs::exists(path)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// True when no process has the pid recorded in `pid_file`.
bool ProcessGone(const fs::path& pid_file) {
  const pid_t pid = std::stoi(ReadFile(pid_file));
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Sends `fd` (1 or 2) to a file for its lifetime.
class CaptureFd {
 public:
  CaptureFd(int fd, const fs::path& path) : fd_(fd) {
    std::fflush(nullptr);
    saved_ = ::dup(fd);
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(file, fd);
    ::close(file);
  }
  ~CaptureFd() {
    std::fflush(nullptr);
    ::dup2(saved_, fd_);
    ::close(saved_);
  }
  CaptureFd(const CaptureFd&) = delete;
  CaptureFd& operator=(const CaptureFd&) = delete;

 private:
  int fd_;
  int saved_;
};

Error SpawnError(const SpawnOptions& options) {
  try {
    const SpawnResult result = SpawnAndSupervise(options);
    ADD_FAILURE() << "expected an error, got exit code " << result.exit_code;
  } catch (const Error& error) {
    return error;
  }
  return InternalError("no error thrown");
}

TEST(LinePrefixer, PrefixesCompleteLinesAcrossChunks) {
  LinePrefixer lines("[rank 1] ");
  EXPECT_EQ(lines.Feed("a\nb"), "[rank 1] a\n");
  EXPECT_EQ(lines.Feed("c\n\nd"), "[rank 1] bc\n[rank 1] \n");
  EXPECT_EQ(lines.Feed(""), "");
  EXPECT_EQ(lines.Finish(), "[rank 1] d\n");
  EXPECT_EQ(lines.Finish(), "");
}

TEST(LinePrefixer, BreaksOverlongLines) {
  LinePrefixer lines("> ");
  const std::string half(LinePrefixer::kMaxLine / 2, 'x');
  EXPECT_EQ(lines.Feed(half), "");
  EXPECT_EQ(lines.Feed(half), "> " + half + half + "\n");
  EXPECT_EQ(lines.Finish(), "");
}

TEST(SpawnedRankEnv, ListsTorchrunVariablesThenExtraEnv) {
  SpawnOptions options;
  options.nproc = 4;
  options.node_rank = 2;
  options.nnodes = 3;
  options.master_addr = "10.0.0.7";
  options.master_port = 1234;
  options.extra_env = {{"NCCL_DEBUG", "INFO"}};
  const std::vector<std::pair<std::string, std::string>> expected = {{"RANK", "9"},
                                                                     {"WORLD_SIZE", "12"},
                                                                     {"LOCAL_RANK", "1"},
                                                                     {"LOCAL_WORLD_SIZE", "4"},
                                                                     {"GROUP_RANK", "2"},
                                                                     {"GROUP_WORLD_SIZE", "3"},
                                                                     {"MASTER_ADDR", "10.0.0.7"},
                                                                     {"MASTER_PORT", "1234"},
                                                                     {"TOPSPIN_SPAWNED", "1"},
                                                                     {"NCCL_DEBUG", "INFO"}};
  EXPECT_EQ(SpawnedRankEnv(options, 1), expected);
}

TEST(SpawnAndSupervise, AllRanksExitingZeroSucceeds) {
  // Rank 0 exits at once, the others later: an early clean exit is no failure.
  const SpawnResult result = SpawnAndSupervise(Sh("[ $RANK = 0 ] || sleep 0.3; exit 0", 3));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_EQ(result.cause, "");
}

TEST(SpawnAndSupervise, SetsRankEnvironment) {
  const testing::TempDir dir;
  const topspin::testing::ScopedEnv inherited("SPAWN_TEST_INHERITED", "yes");
  const topspin::testing::ScopedEnv overridden("SPAWN_TEST_OVERRIDDEN", "parent");
  const topspin::testing::ScopedEnv stale_rank("RANK", "99");
  SpawnOptions options =
      Sh("echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE "
         "$MASTER_ADDR $MASTER_PORT $TOPSPIN_SPAWNED $SPAWN_TEST_INHERITED "
         "$SPAWN_TEST_OVERRIDDEN\" > " +
             dir.path().string() + "/out.$RANK",
         2);
  options.node_rank = 1;
  options.nnodes = 3;
  options.master_addr = "10.1.2.3";
  options.master_port = 29555;
  options.extra_env = {{"SPAWN_TEST_OVERRIDDEN", "extra"}};
  const SpawnResult result = SpawnAndSupervise(options);
  ASSERT_EQ(result.exit_code, 0) << result.cause;
  EXPECT_EQ(ReadFile(dir / "out.2"), "2 6 0 2 1 3 10.1.2.3 29555 1 yes extra\n");
  EXPECT_EQ(ReadFile(dir / "out.3"), "3 6 1 2 1 3 10.1.2.3 29555 1 yes extra\n");
  EXPECT_FALSE(fs::exists(dir / "out.99"));
}

TEST(SpawnAndSupervise, FailingRankStopsTheOthers) {
  const testing::TempDir dir;
  SpawnOptions options = Sh(RecordPid(dir) + "if [ $RANK = 1 ]; then " + AwaitPids(dir, {0, 2}) +
                                "exit 3; fi; exec sleep 60",
                            3);
  options.grace_s = 5;
  const auto start = Clock::now();
  const SpawnResult result = SpawnAndSupervise(options);
  EXPECT_LT(SecondsSince(start), 4) << "the sleepers should go at SIGTERM, well before SIGKILL";
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.cause, "rank 1 exited with status 3");
  EXPECT_TRUE(ProcessGone(dir / "pid.0"));
  EXPECT_TRUE(ProcessGone(dir / "pid.2"));
}

TEST(SpawnAndSupervise, RankKilledBySignalIsNamed) {
  const testing::TempDir dir;
  const SpawnResult result =
      SpawnAndSupervise(Sh(RecordPid(dir) + "if [ $RANK = 1 ]; then " + AwaitPids(dir, {0}) +
                               "kill -9 $$; fi; exec sleep 60",
                           2));
  EXPECT_EQ(result.exit_code, 128 + 9);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.cause, "rank 1 was killed by signal 9 (Killed)");
  EXPECT_TRUE(ProcessGone(dir / "pid.0"));
}

TEST(SpawnAndSupervise, AStoppedRankIsNamedNotTheOneThatTimedOutWaitingForIt) {
  const testing::TempDir dir;
  // Rank 1 stops (as SIGSTOP would); rank 0 gives up on it, as a
  // collective's timeout would, and exits first.
  const SpawnResult result = SpawnAndSupervise(
      Sh(RecordPid(dir) + "if [ $RANK = 1 ]; then kill -STOP $$; fi; " + AwaitPids(dir, {1}) +
             "until grep -q ') [Tt] ' /proc/$(cat " + (dir / "pid.1").string() +
             ")/stat; do sleep 0.02; done; exit 2",
         2));
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_THAT(result.cause, HasSubstr("rank 1 was stopped (SIGSTOP or a debugger) and stopped "
                                      "answering; then rank 0 exited with status 2"));
  EXPECT_TRUE(ProcessGone(dir / "pid.1"));  // killed after the grace, stopped or not
}

TEST(SpawnAndSupervise, RankIgnoringSigtermIsKilledAfterGrace) {
  const testing::TempDir dir;
  SpawnOptions options = Sh("if [ $RANK = 1 ]; then " + AwaitPids(dir, {0}) +
                                "exit 5; fi; trap '' TERM; " + RecordPid(dir) + "exec sleep 60",
                            2);
  options.grace_s = 1;
  const auto start = Clock::now();
  const SpawnResult result = SpawnAndSupervise(options);
  const double seconds = SecondsSince(start);
  EXPECT_GE(seconds, 1.0);  // it got its grace
  EXPECT_LT(seconds, 10);   // and no more
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.cause, "rank 1 exited with status 5");
  EXPECT_TRUE(ProcessGone(dir / "pid.0"));
}

TEST(SpawnAndSupervise, MissingExecutableIsDistError) {
  SpawnOptions options;
  options.argv = {"/nonexistent/topspin-rank", "--flag"};
  options.nproc = 2;
  const Error error = SpawnError(options);
  EXPECT_EQ(error.kind(), ErrorKind::kDist);
  EXPECT_EQ(error.what_text(),
            "cannot start rank 0: /nonexistent/topspin-rank: No such file or directory");
  EXPECT_THAT(error.hint(), HasSubstr("exists and is executable"));

  options.argv = {"topspin-no-such-program"};
  const Error not_on_path = SpawnError(options);
  EXPECT_EQ(not_on_path.kind(), ErrorKind::kDist);
  EXPECT_EQ(not_on_path.what_text(),
            "cannot start rank 0: topspin-no-such-program: not found on PATH");
}

TEST(SpawnAndSupervise, FindsExecutableOnPath) {
  SpawnOptions options;
  options.argv = {"sh", "-c", "exit 4"};
  const SpawnResult result = SpawnAndSupervise(options);
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.cause, "rank 0 exited with status 4");
}

TEST(SpawnAndSupervise, RejectsBadOptions) {
  SpawnOptions options = Sh("exit 0", 0);
  Error error = SpawnError(options);
  EXPECT_EQ(error.kind(), ErrorKind::kDist);
  EXPECT_EQ(error.where().field, "nproc");
  options = Sh("exit 0", 1);
  options.node_rank = 2;
  options.nnodes = 2;
  EXPECT_EQ(SpawnError(options).where().field, "node_rank");
  options = Sh("exit 0", 1);
  options.grace_s = -1;
  EXPECT_EQ(SpawnError(options).where().field, "grace_s");
}

// Rank 0 writes straight to the launcher's fds; rank 1's lines get a prefix,
// including a last line without '\n'.
TEST(SpawnAndSupervise, PrefixesOutputOfOtherRanks) {
  const testing::TempDir dir;
  const std::string script = "echo out $RANK; echo err $RANK >&2; [ $RANK = 0 ] || printf 'tail 1'";
  SpawnResult result;
  {
    const CaptureFd out(STDOUT_FILENO, dir / "stdout");
    const CaptureFd err(STDERR_FILENO, dir / "stderr");
    result = SpawnAndSupervise(Sh(script, 2));
  }
  ASSERT_EQ(result.exit_code, 0) << result.cause;
  const std::vector<std::string> out = Lines(ReadFile(dir / "stdout"));
  const std::vector<std::string> err = Lines(ReadFile(dir / "stderr"));
  EXPECT_THAT(out, Contains("out 0"));
  EXPECT_THAT(out, Contains("[rank 1] out 1"));
  EXPECT_THAT(out, Contains("[rank 1] tail 1"));
  EXPECT_THAT(out, Not(Contains("out 1")));
  EXPECT_EQ(out.size(), 3u);
  EXPECT_THAT(err, Contains("err 0"));
  EXPECT_THAT(err, Contains("[rank 1] err 1"));
  EXPECT_EQ(err.size(), 2u);
}

// A process the rank left behind keeps its output pipe open: the launcher
// returns when the rank is reaped and still forwards the last partial line.
TEST(SpawnAndSupervise, DoesNotWaitForProcessesRanksLeaveBehind) {
  const testing::TempDir dir;
  const std::string straggler = (dir / "straggler").string();
  SpawnResult result;
  const auto start = Clock::now();
  {
    const CaptureFd out(STDOUT_FILENO, dir / "stdout");
    result = SpawnAndSupervise(
        Sh("[ $RANK = 0 ] || { printf 'tail 1'; sleep 30 & echo $! > " + straggler + "; }", 2));
  }
  EXPECT_LT(SecondsSince(start), 10);
  ASSERT_EQ(result.exit_code, 0) << result.cause;
  EXPECT_EQ(ReadFile(dir / "stdout"), "[rank 1] tail 1\n");
  ::kill(std::stoi(ReadFile(straggler)), SIGKILL);
}

TEST(SpawnAndSupervise, CanLeaveOutputUnprefixed) {
  const testing::TempDir dir;
  SpawnOptions options = Sh("echo out $RANK", 2);
  options.prefix_output = false;
  SpawnResult result;
  {
    const CaptureFd out(STDOUT_FILENO, dir / "stdout");
    result = SpawnAndSupervise(options);
  }
  ASSERT_EQ(result.exit_code, 0) << result.cause;
  const std::vector<std::string> out = Lines(ReadFile(dir / "stdout"));
  EXPECT_THAT(out, Contains("out 1"));
  EXPECT_THAT(out, Contains("out 0"));
}

// Ranks trap TERM, record that they saw it and exit 0; the launcher is sent
// `sig` once every rank is up.
SpawnResult RunAndSignal(const testing::TempDir& dir, int sig, int times,
                         const SpawnOptions& options) {
  std::thread sender([&] {
    if (!AwaitFile(dir / "pid.0") || !AwaitFile(dir / "pid.1")) return;
    for (int i = 0; i < times; ++i) ::raise(sig);
  });
  SpawnResult result = SpawnAndSupervise(options);
  sender.join();
  return result;
}

TEST(SpawnAndSupervise, ForwardsSigtermToRanks) {
  const testing::TempDir dir;
  const std::string stopped = dir.path().string() + "/stopped.$RANK";
  SpawnOptions options =
      Sh("trap 'echo yes > " + stopped + "; exit 0' TERM; " + RecordPid(dir) +
             "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done; exit 7",
         2);
  options.grace_s = 20;
  const SpawnResult result = RunAndSignal(dir, SIGTERM, 1, options);
  EXPECT_EQ(result.cause, "stopped by SIGTERM");
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_EQ(ReadFile(dir / "stopped.0"), "yes\n");
  EXPECT_EQ(ReadFile(dir / "stopped.1"), "yes\n");
  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL) << "the launcher's handler was not removed";
}

TEST(SpawnAndSupervise, SecondSigintKillsWithoutGrace) {
  const testing::TempDir dir;
  SpawnOptions options = Sh("trap '' TERM; " + RecordPid(dir) + "exec sleep 60", 2);
  options.grace_s = 30;
  const auto start = Clock::now();
  const SpawnResult result = RunAndSignal(dir, SIGINT, 2, options);
  EXPECT_LT(SecondsSince(start), 10);
  EXPECT_EQ(result.cause, "stopped by SIGINT");
  EXPECT_EQ(result.exit_code, 128 + SIGINT);
  EXPECT_TRUE(ProcessGone(dir / "pid.0"));
  EXPECT_TRUE(ProcessGone(dir / "pid.1"));
}

// True once `pid` has exited (gone, or a zombie waiting for whoever adopted it).
bool ProcessDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren + 2 < line.size() && line[paren + 2] == 'Z';
}

TEST(SpawnAndSupervise, RanksDieWithTheLauncher) {
  const testing::TempDir dir;
  const SpawnOptions options = Sh(RecordPid(dir) + "exec sleep 60", 2);
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    SpawnAndSupervise(options);
    ::_exit(0);
  }
  const bool started = AwaitFile(dir / "pid.0") && AwaitFile(dir / "pid.1");
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  ASSERT_TRUE(started);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (const char* name : {"pid.0", "pid.1"}) {
    const pid_t rank = std::stoi(ReadFile(dir / name));
    while (!ProcessDead(rank) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(ProcessDead(rank)) << name << " outlived its launcher";
  }
}

TEST(SpawnAndSupervise, RefusesConcurrentCalls) {
  const testing::TempDir dir;
  SpawnResult first;
  std::thread runner([&] { first = SpawnAndSupervise(Sh(RecordPid(dir) + "sleep 1", 1)); });
  ASSERT_TRUE(AwaitFile(dir / "pid.0"));
  const Error error = SpawnError(Sh("exit 0", 1));
  EXPECT_EQ(error.kind(), ErrorKind::kInternal);
  runner.join();
  EXPECT_EQ(first.exit_code, 0) << first.cause;
}

}  // namespace
}  // namespace topspin
