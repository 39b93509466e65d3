// topspin pipeline CONFIG [--set k=v]... [--epochs N] [--batches N] [--valid]
// [--trace FILE]:
// runs the config's input pipeline alone (no model) and reports the
// features, the first list, throughput, stage utilisation and the data
// stall a trainer would see. "demo" as CONFIG is the embedded demo config.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/pipeline_report.h"
#include "topspin/core/config_schema.h"
#include "topspin/demo_config.h"

namespace topspin::cli {
namespace {

struct PipelineArgs {
  std::string path;
  std::vector<std::string> overrides;
  PipelineReportOptions report;
  bool valid = false;
};

}  // namespace

void RegisterPipeline(CLI::App& app) {
  static PipelineArgs args;
  auto* cmd = app.add_subcommand(
      "pipeline", "Run a config's input pipeline alone: features, first batch, throughput, stalls");
  cmd->add_option("CONFIG", args.path, "YAML config with data.train and pipeline.dense/sparse")
      ->required();
  cmd->add_option("--set", args.overrides, "override a key: --set data.train=DIR (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--epochs", args.report.epochs, "epochs to run")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000}))
      ->capture_default_str();
  cmd->add_option("--batches", args.report.max_batches, "stop after this many batches (0: all)")
      ->capture_default_str();
  cmd->add_option("--trace", args.report.trace,
                  "write a Chrome/Perfetto trace of each worker's read, decode, transform and "
                  "assemble, and of the consumer's waits");
  cmd->add_flag("--valid", args.valid, "read data.valid instead of data.train");
  cmd->callback([] {
    const Config config = args.path == "demo"
                              ? Config::Parse(build::kDemoConfig, "<embedded configs/demo.yaml>",
                                              args.overrides, TopspinSchema())
                              : Config::Load(args.path, args.overrides, TopspinSchema());
    args.report.dataset_key = args.valid ? "data.valid" : "data.train";
    RunPipelineReport(config, args.report);
  });
}

}  // namespace topspin::cli
