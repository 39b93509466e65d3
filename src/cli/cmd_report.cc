// topspin report RUN_DIR [--out FILE]
//
// One self-contained HTML page about a training run (topspin/perf/report.h):
// loss, validation metrics, throughput, step phases, loader stages, the
// profile and the config. Written to RUN_DIR/report.html or --out; prints
// the path.
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/perf/report.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::string run_dir;
  std::string out;
};

void WriteReport(const ReportArgs& args) {
  const RunReport report = LoadRunReport(args.run_dir);
  for (const auto& warning : report.warnings) spdlog::warn("{}", warning);
  const fs::path out = args.out.empty() ? fs::path(args.run_dir) / kReportFile : fs::path(args.out);
  WriteFileAtomic(out, RenderReportHtml(report));
  fmt::print("{}\n", out.string());
}

}  // namespace

void RegisterReport(CLI::App& app) {
  static ReportArgs args;
  auto* cmd = app.add_subcommand(
      "report", "An HTML page of a training run: loss, validation, throughput, phases, profile");
  cmd->add_option("RUN_DIR", args.run_dir, "a run directory that training wrote")->required();
  cmd->add_option("--out", args.out, "where to write the page (default: RUN_DIR/report.html)");
  cmd->callback([] { WriteReport(args); });
}

}  // namespace topspin::cli
