#include "cli/commands.h"
namespace topspin::cli {
void RegisterDemo(CLI::App&) {}
}  // namespace topspin::cli
