// topspin: the command-line entry point. Parses flags with CLI11, runs one
// subcommand, and maps errors to exit codes: 0 ok, 2 user error (bad
// config, data, flags), 1 internal error.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_request.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/log.h"
#include "topspin/core/omp_wait.h"
#include "topspin/core/strings.h"
#ifdef TOPSPIN_HAVE_PARQUET
#include "topspin/parquet/parquet_import.h"
#endif

namespace {

// CLI11 reports an unknown subcommand as "A subcommand is required"; name
// the word that was not understood instead, with the closest command.
void CheckSubcommandName(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (arg.starts_with("-")) continue;
    if (std::find(names.begin(), names.end(), arg) != names.end()) return;
    const auto guess = topspin::ClosestMatch(arg, names);
    throw topspin::Error(
        topspin::ErrorKind::kUsage, fmt::format("unknown command \"{}\"", arg), {},
        guess ? fmt::format("did you mean \"{}\"? `topspin --help` lists the commands", *guess)
              : "`topspin --help` lists the commands");
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace topspin;
#ifdef TOPSPIN_HAVE_TORCH
  ApplyOmpWaitDefault(argc, argv);  // may re-execute this binary, before anything else runs
#endif
  CLI::App app{
      "topspin: a C++ training runtime that keeps accelerators busy.\n"
      "Run `topspin <command> --help` for a command's options.",
      "topspin"};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", std::string("topspin ") + build::kVersion,
                       "print the version and exit (`topspin version` says more)");
  app.fallthrough();
  InitLogging("info");
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& level) { SetLogLevel(level); },
         "console log level (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

#ifdef TOPSPIN_HAVE_PARQUET
  RegisterParquetImport();
#endif
  cli::RegisterVersion(app);
  cli::RegisterConfig(app);
  cli::RegisterDemo(app);
  cli::RegisterGen(app);
  cli::RegisterConvert(app);
  cli::RegisterInspect(app);
  cli::RegisterDataset(app);
  cli::RegisterTokenizer(app);
  cli::RegisterPipeline(app);
  cli::RegisterTrain(app);
  cli::RegisterTune(app);
  cli::RegisterEval(app);
  cli::RegisterScore(app);
  cli::RegisterGenerate(app);
  cli::RegisterGpt2(app);
  cli::RegisterProfile(app);
  cli::RegisterReport(app);
  cli::RegisterPlan(app);
  cli::RegisterBench(app);
  cli::RegisterCompletion(app);

  try {
    CheckSubcommandName(app, argc, argv);
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const cli::ExitRequest& e) {
    return e.code();  // the command already printed its outcome
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "topspin: %s\nRun `topspin --help` for usage.\n", e.what());
    return kExitUser;
  } catch (const Error& e) {
    std::fprintf(stderr, "topspin: %s error: %s\n", ErrorKindName(e.kind()), e.Message().c_str());
    return ExitCodeFor(e);
  } catch (const std::filesystem::filesystem_error& e) {
    // A directory that cannot be created or written, a path that is not
    // what it should be: the user's to fix, and the path says where.
    const Error io = FilesystemError(e);
    std::fprintf(stderr, "topspin: %s error: %s\n", ErrorKindName(io.kind()), io.Message().c_str());
    return ExitCodeFor(io);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topspin: internal error: %s\n", e.what());
    return kExitInternal;
  }
  return kExitOk;
}
