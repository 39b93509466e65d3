#include "topspin/core/omp_wait.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace topspin {
namespace {

// An environment made of the given variables only.
std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(OmpWait, ComputeCommandsGetTheDefault) {
  for (const char* command : {"train", "bench", "tune", "profile", "eval", "version"}) {
    EXPECT_TRUE(ShouldSetOmpWait(Env({}), command)) << command;
  }
}

TEST(OmpWait, CommandsWithoutLibTorchComputeDoNot) {
  for (const char* command : {"gen", "convert", "pipeline", "inspect", "completion", ""}) {
    EXPECT_FALSE(ShouldSetOmpWait(Env({}), command)) << command;
  }
}

TEST(OmpWait, TheUsersSettingWins) {
  EXPECT_FALSE(ShouldSetOmpWait(Env({{"GOMP_SPINCOUNT", "300000"}}), "train"));
  EXPECT_FALSE(ShouldSetOmpWait(Env({{"OMP_WAIT_POLICY", "active"}}), "train"));
  EXPECT_FALSE(ShouldSetOmpWait(Env({{"GOMP_SPINCOUNT", ""}}), "train"));
}

TEST(OmpWait, AReexecutedProcessDoesNotReexecuteAgain) {
  EXPECT_FALSE(ShouldSetOmpWait(Env({{std::string(kOmpDefaultMarker), "1"}}), "train"));
}

}  // namespace
}  // namespace topspin
