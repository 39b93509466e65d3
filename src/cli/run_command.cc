#include "cli/run_command.h"

#include <cstdio>

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

}  // namespace topspin::cli
