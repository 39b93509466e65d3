#include "cli/commands.h"
namespace topspin::cli {
void RegisterBench(CLI::App&) {}
}  // namespace topspin::cli
