#include "topspin/core/run_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

TEST(RunDir, NumbersRunsAndWritesTheResolvedConfig) {
  testing::TempDir tmp;
  const Config config = Config::Defaults({"pipeline.threads=3"}, TopspinSchema());
  const auto first = CreateRunDirectory(tmp / "runs", "demo", config);
  const auto second = CreateRunDirectory(tmp / "runs", "demo", config);
  EXPECT_EQ(first.filename(), "demo-001");
  EXPECT_EQ(second.filename(), "demo-002");
  EXPECT_EQ(ReadFile(first / "config.hash"), config.Hash() + "\n");
  // The written config reads back to the same meaning.
  const Config back = Config::Load(first / "config.yaml", {}, TopspinSchema());
  EXPECT_EQ(back.Hash(), config.Hash());
  EXPECT_EQ(back.GetInt("pipeline.threads"), 3);
}

TEST(RunDir, RejectsNamesWithSlashes) {
  testing::TempDir tmp;
  const Config config = Config::Defaults({}, TopspinSchema());
  EXPECT_THROW(CreateRunDirectory(tmp.path(), "a/b", config), Error);
  EXPECT_THROW(CreateRunDirectory(tmp.path(), "", config), Error);
}

TEST(RunDir, AnOverlongNameIsAConfigErrorAboutTheName) {
  testing::TempDir tmp;
  const Config config = Config::Defaults({}, TopspinSchema());
  try {
    CreateRunDirectory(tmp.path(), std::string(300, 'r'), config);
    FAIL() << "a 300-byte directory name";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_EQ(e.where().field, "run.name");
    EXPECT_THAT(e.Message(), ::testing::HasSubstr("is too long for a directory name (300 bytes)"));
  }
}

TEST(RunDirLock, ASecondHolderIsRefusedByPidUntilTheFirstLetsGo) {
  testing::TempDir tmp;
  std::optional<RunDirLock> first(std::in_place, tmp.path());
  try {
    RunDirLock second(tmp.path());
    FAIL() << "two locks on one run directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), ::testing::HasSubstr(tmp.path().string() +
                                                  " is in use by another training (pid " +
                                                  std::to_string(::getpid()) + ")"));
  }
  first.reset();
  EXPECT_NO_THROW(RunDirLock again(tmp.path()));
}

TEST(RunDirLock, AKilledHolderLeavesNoStaleLock) {
  testing::TempDir tmp;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunDirLock held(tmp.path());
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(ReadFile(tmp / ".lock"), std::to_string(child) + "\n");  // it did hold it
  EXPECT_NO_THROW(RunDirLock mine(tmp.path()));
}

TEST(RunDirLock, AnUnwritableDirectoryIsAnIoErrorNamingTheLockFile) {
  try {
    RunDirLock lock("/proc/no-such-run");
    FAIL() << "locked a directory that cannot exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), ::testing::HasSubstr("/proc/no-such-run/.lock"));
  }
}

}  // namespace
}  // namespace topspin
