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

// Runs a benchmark peer (`command` runs `script`) and returns the JSON
// object it printed last. Error{kIo} naming the script, with its output,
// when it fails or prints no object.
std::string RunPeer(const std::string& command, const std::string& script);

}  // namespace topspin::cli
