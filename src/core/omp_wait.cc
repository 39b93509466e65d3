#include "topspin/core/omp_wait.h"

#include <unistd.h>

#include <array>
#include <cstdlib>

#include <fmt/format.h>

namespace topspin {
namespace {

constexpr std::array<std::string_view, 10> kComputeCommands = {
    "train", "tune", "bench", "profile", "demo", "eval", "score", "generate", "gpt2", "version"};

// The subcommand word: the first argument that is not an option, skipping
// the value of the one global option that takes one.
std::string_view CommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (!arg.starts_with("-")) return arg;
  }
  return {};
}

}  // namespace

bool OmpWaitMatters(std::string_view command) {
  for (const auto c : kComputeCommands) {
    if (c == command) return true;
  }
  return false;
}

bool ShouldSetOmpWait(const std::function<const char*(const char*)>& getenv,
                      std::string_view command) {
  if (!OmpWaitMatters(command)) return false;
  for (const char* name : {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY", kOmpDefaultMarker.data()}) {
    if (getenv(name) != nullptr) return false;  // the user's choice, or already done
  }
  return true;
}

void ApplyOmpWaitDefault(int argc, char** argv) {
  if (!ShouldSetOmpWait([](const char* n) { return std::getenv(n); }, CommandWord(argc, argv))) {
    return;
  }
  setenv("GOMP_SPINCOUNT", kOmpSpinCountDefault.data(), 1);
  setenv(kOmpDefaultMarker.data(), "1", 1);
  execv("/proc/self/exe", argv);
  // No /proc, or exec refused: carry on with libgomp's default, and unset
  // the variables so that nothing claims a setting this process lacks.
  unsetenv("GOMP_SPINCOUNT");
  unsetenv(kOmpDefaultMarker.data());
}

std::string OmpWaitSetting() {
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (std::getenv(kOmpDefaultMarker.data()) != nullptr && spin != nullptr && policy == nullptr) {
    return fmt::format("GOMP_SPINCOUNT={} (topspin's default; set GOMP_SPINCOUNT or "
                       "OMP_WAIT_POLICY to choose)",
                       spin);
  }
  if (spin == nullptr && policy == nullptr) {
    return "libgomp's default spin (GOMP_SPINCOUNT and OMP_WAIT_POLICY unset)";
  }
  std::string s;
  if (spin != nullptr) s = fmt::format("GOMP_SPINCOUNT={}", spin);
  if (policy != nullptr) s += fmt::format("{}OMP_WAIT_POLICY={}", s.empty() ? "" : ", ", policy);
  return s + " (from the environment)";
}

}  // namespace topspin
