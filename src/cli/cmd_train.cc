// topspin train CONFIG [--set k=v]... [--run-dir DIR] [--resume auto|PATH]:
// trains the search ranker (topspin/train/ranker_trainer.h). Without
// --run-dir a new numbered run directory <run.dir>/<run.name>-NNN is made
// (with the resolved config); --resume auto continues the newest complete
// checkpoint of --run-dir.
#include <cmath>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/run_dir.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

struct TrainArgs {
  std::string path;
  std::vector<std::string> overrides;
  std::string run_dir;
  std::string resume;
};

void RunTrain(const TrainArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const Config config = Config::Load(args.path, args.overrides, TopspinSchema());
  SetLogLevel(config.GetString("run.log_level"));
  if (!args.resume.empty() && args.run_dir.empty() && args.resume == "auto") {
    throw Error(ErrorKind::kUsage,
                "--resume auto needs --run-dir: the run whose checkpoints to continue",
                {.field = "--resume"}, "pass the run directory printed when the run started");
  }
  std::filesystem::path dir = args.run_dir;
  if (dir.empty()) {
    const RunConfig run = RunConfig::From(config);
    dir = CreateRunDirectory(run.dir, run.name, config);
  } else {
    std::filesystem::create_directories(dir);
    WriteFileAtomic(dir / "config.yaml", config.ToYaml());
  }
  fmt::print("run directory {}\n", dir.string());
  std::fflush(stdout);
  const RankerTrainResult r = TrainRanker(config, {.run_dir = dir, .resume = args.resume});
  fmt::print(
      "trained       {} steps{}, {:.0f} docs/s, last loss {:.4f}{}\n", r.step,
      r.resumed_from >= 0 ? fmt::format(" (resumed at {})", r.resumed_from) : "", r.docs_per_s,
      r.last_loss,
      r.skipped_steps > 0 ? fmt::format(", {} non-finite steps skipped", r.skipped_steps) : "");
  if (!std::isnan(r.valid_ndcg10)) fmt::print("valid         NDCG@10 {:.4f}\n", r.valid_ndcg10);
  fmt::print("phases        {}\n", DescribePhases(r));
  fmt::print("checkpoint    {}\n", r.checkpoint.string());
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which training needs",
              {}, "install libtorch-dev (scripts/install-deps.sh) and rebuild");
#endif
}

}  // namespace

void RegisterTrain(CLI::App& app) {
  static TrainArgs args;
  auto* cmd = app.add_subcommand("train", "Train the search ranker from a config");
  cmd->add_option("CONFIG", args.path, "YAML config (configs/ranker-shop.yaml)")->required();
  cmd->add_option("--set", args.overrides, "override a key: --set data.train=DIR (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", args.run_dir,
                  "write into this directory (default: a new "
                  "<run.dir>/<run.name>-NNN)");
  cmd->add_option("--resume", args.resume,
                  "auto: continue the newest complete checkpoint of --run-dir; or a step-N dir");
  cmd->callback([] { RunTrain(args); });
}

}  // namespace topspin::cli
