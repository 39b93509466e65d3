// Running a peer process (a Python benchmark) and collecting its output.
#pragma once

#include <string>

namespace topspin::cli {

struct CommandResult {
  int status = 0;      // as pclose() returns it; 0 is success
  std::string output;  // stdout (and stderr when the command redirects it)
};

// Runs `command` through /bin/sh. Throws Error{kIo} when it cannot start.
CommandResult RunCommand(const std::string& command);

}  // namespace topspin::cli
