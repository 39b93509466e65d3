// topspin eval RUN_DIR|CHECKPOINT [--data DIR] [--config FILE] [--set k=v]...
// [--json FILE]: scores held-out data with a trained model: a ranker's
// NDCG@1/3/5/10, MAP@10 and MRR (topspin/train/ranker_trainer.h
// EvaluateRanker), a GPT's loss and perplexity (topspin/train/gpt_inference.h
// EvaluateGpt). The config defaults to the run's config.yaml; --data
// replaces data.valid.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/gpt_inference.h"
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string checkpoint;
  std::string data;
  std::string config;
  std::vector<std::string> overrides;
  std::string json;
  std::string which = "best";
};

void RunEval(const EvalArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const fs::path checkpoint(args.checkpoint);
  CheckCheckpointDir(checkpoint);
  std::vector<std::string> overrides = args.overrides;
  if (!args.data.empty()) overrides.push_back("data.valid=" + args.data);
  const fs::path config_path = args.config.empty() ? RunConfigOf(checkpoint) : fs::path(args.config);
  const Config config = Config::Load(config_path.string(), overrides, TopspinSchema());
  const Settings settings = Settings::From(config);
  ApplyProcessPolicy(settings.train.torch_threads);
  SetLogLevel(settings.run.log_level);
  const CheckpointChoice choice =
      args.which == "latest" ? CheckpointChoice::kLatest : CheckpointChoice::kBest;
  if (settings.model.kind == "gpt") {
    const GptEvalResult g = EvaluateGpt(config, checkpoint, "data.valid", choice);
    fmt::print("checkpoint    {} (step {})\n", g.checkpoint.string(), g.step);
    fmt::print("data          {} ({:.0f} tokens, {:.1f} s)\n", settings.data.valid, g.tokens,
               g.seconds);
    fmt::print("loss          {:.4f}\nperplexity    {:.3f}\n", g.loss, g.perplexity);
    if (!args.json.empty()) {
      const nlohmann::json out{{"checkpoint", g.checkpoint.string()},
                               {"step", g.step},
                               {"data", settings.data.valid},
                               {"tokens", g.tokens},
                               {"metrics", {{"loss", g.loss}, {"perplexity", g.perplexity}}}};
      WriteFileAtomic(args.json, out.dump(2) + "\n");
    }
    return;
  }
  const RankerEvalResult r = EvaluateRanker(config, checkpoint, "data.valid", choice);
  fmt::print("checkpoint    {} (step {})\n", r.checkpoint.string(), r.step);
  fmt::print("data          {} ({} queries, {:.1f} s)\n", settings.data.valid, r.lists,
             r.seconds);
  for (const char* name : {"ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map@10", "mrr"}) {
    fmt::print("{:<13} {:.4f}\n", name, r.metrics.at(name));
  }
  if (!args.json.empty()) {
    nlohmann::json out{{"checkpoint", r.checkpoint.string()},
                       {"step", r.step},
                       {"data", settings.data.valid},
                       {"queries", r.lists},
                       {"metrics", r.metrics}};
    WriteFileAtomic(args.json, out.dump(2) + "\n");
  }
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which evaluation needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void CheckCheckpointDir(const fs::path& path) {
  if (!fs::is_directory(path)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} is not a directory", path.string()),
                {.file = path.string()},
                "pass a run directory (runs/ranker-shop-001) or a checkpoints/step-N directory");
  }
}

void AddCheckpointArgs(CLI::App* cmd, std::string& checkpoint, std::string& which) {
  cmd->add_option("CHECKPOINT", checkpoint,
                  "a run directory (its best checkpoint, see --checkpoint) or a "
                  "checkpoints/step-N directory")
      ->required();
  cmd->add_option("--checkpoint", which,
                  "of a run directory: best (train.best; the newest without one) or latest")
      ->check(CLI::IsMember({"best", "latest"}))
      ->capture_default_str();
}

fs::path RunConfigOf(const fs::path& path) {
  // A run directory (it holds config.yaml) that has not checkpointed yet.
  if (fs::exists(path / "config.yaml") && !fs::is_directory(path / "checkpoints")) {
    throw Error(ErrorKind::kUsage,
                "the run has no checkpoint yet: there is no model to use",
                {.file = path.string()},
                "let it train to train.checkpoint_every, or stop it with Ctrl-C (it "
                "checkpoints), then run this again");
  }
  const fs::path dir = fs::is_directory(path / "checkpoints") ? path : path.parent_path().parent_path();
  const fs::path config = dir / "config.yaml";
  if (!fs::exists(config)) {
    throw Error(ErrorKind::kUsage,
                fmt::format("no config.yaml next to {}: cannot tell which model it holds",
                            path.string()),
                {.file = config.string()}, "pass the run's config with --config FILE");
  }
  return config;
}

void RegisterEval(CLI::App& app) {
  static EvalArgs args;
  auto* cmd = app.add_subcommand(
      "eval", "Score held-out data with a trained model: a ranker's NDCG@k, MAP@10, MRR; a "
              "GPT's loss and perplexity");
  AddCheckpointArgs(cmd, args.checkpoint, args.which);
  cmd->add_option("--data", args.data, "dataset to score (default: the config's data.valid)");
  cmd->add_option("--config", args.config, "config of the run (default: the run's config.yaml)");
  cmd->add_option("--set", args.overrides, "override a key, e.g. --set pipeline.threads=2")
      ->allow_extra_args(false);
  cmd->add_option("--json", args.json, "also write the metrics as JSON to this file");
  cmd->callback([] { RunEval(args); });
}

}  // namespace topspin::cli
