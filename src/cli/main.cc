// topspin: the command-line entry point. Parses flags with CLI11, runs one
// subcommand, and maps errors to exit codes: 0 ok, 2 user error (bad
// config, data, flags), 1 internal error.
#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"

int main(int argc, char** argv) {
  using namespace topspin;
  CLI::App app{
      "topspin: a C++ training runtime that keeps accelerators busy.\n"
      "Run `topspin <command> --help` for a command's options.",
      "topspin"};
  app.require_subcommand(1, 1);
  app.fallthrough();
  InitLogging("info");
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& level) { SetLogLevel(level); },
         "console log level (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  cli::RegisterVersion(app);
  cli::RegisterConfig(app);
  cli::RegisterDemo(app);
  cli::RegisterBench(app);

  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "topspin: %s\nRun `topspin --help` for usage.\n", e.what());
    return kExitUser;
  } catch (const Error& e) {
    std::fprintf(stderr, "topspin: %s error: %s\n", ErrorKindName(e.kind()), e.Message().c_str());
    return ExitCodeFor(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topspin: internal error: %s\n", e.what());
    return kExitInternal;
  }
  return kExitOk;
}
