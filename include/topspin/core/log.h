// Logging on spdlog: one console logger (stderr) for the whole process.
//
// Lines look like "2026-11-29 15:30:00.123 [info] message" and gain a rank
// prefix ("[rank 3] ") once SetLogRank() is called by a distributed launch.
// Safe to call from any thread; Init is idempotent.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace topspin {

// Installs the console logger. level: trace|debug|info|warn|error|off;
// an unknown level throws Error{kConfig} listing the valid ones.
void InitLogging(std::string_view level = "info");
void SetLogLevel(std::string_view level);
// Adds "[rank R] " to every line (R < 0 removes it).
void SetLogRank(int rank);

}  // namespace topspin
