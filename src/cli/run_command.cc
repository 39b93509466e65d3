#include "cli/run_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin::cli {

CommandResult RunCommand(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw IoError("cannot run: " + command);
  CommandResult r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) r.output += buf;
  r.status = ::pclose(pipe);
  return r;
}

std::string RunPeer(const std::string& command, const std::string& script) {
  const auto [status, output] = RunCommand(command);
  // The result is the last line that starts with '{' (peers print warnings
  // and progress before it).
  size_t at = output.rfind("\n{");
  at = at != std::string::npos ? at + 1 : (output.starts_with('{') ? 0 : std::string::npos);
  if (status != 0 || at == std::string::npos) {
    throw IoError(fmt::format("the peer failed: {}", output.substr(0, 800)),
                  ErrorWhere{.file = script},
                  "install the benchmark peers (scripts/install-deps.sh --bench) and run from the "
                  "repository root, or pass --peers");
  }
  return output.substr(at);
}

}  // namespace topspin::cli
