// topspin tune CONFIG [--budget SECONDS] [--memory-limit FRACTION|BYTES] [--out FILE]
//   [--log FILE] [--set k=v]... [--nproc N] [--margin M] [--free-batch] [--no-batch]
//   [--no-cache]
// The AutoTuner (topspin/train/tune.h): short controlled trials of the
// config's real training step choose loader threads, prefetch, compute
// threads, pinned memory (CUDA) and the micro-batch; writes a tuned config
// with a comment per choice, a JSONL log of every trial, and a cache entry
// so a re-run on the same machine and workload is instant.
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/tune_args.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/tune.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

void RunTune(const TuneArgs& a) {
#ifdef TOPSPIN_HAVE_TORCH
  const fs::path out =
      a.out.empty() ? fs::path(fs::path(a.config).stem().string() + ".tuned.yaml") : fs::path(a.out);
  TuneRequest request = MakeTuneRequest(a);
  request.log = a.log.empty() ? fs::path(out.string() + ".trials.jsonl") : fs::path(a.log);
  const TuneReport r = Tune(request);
  WriteFileAtomic(out, r.yaml);
  for (const std::string& line : r.summary) fmt::print("{}\n", line);
  fmt::print("settings  {}\n", fmt::join(r.sets, " "));
  fmt::print("config    {}\n", out.string());
  if (!r.cache_hit) fmt::print("trials    {}\n", request.log.string());
  fmt::print("cache     {} ({})\n", r.cache_file.string(), r.cache_hit ? "hit" : "written");
  fmt::print("next      topspin train {}\n", out.string());
#else
  (void)a;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which tuning needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void RegisterTune(CLI::App& app) {
  static TuneArgs args;
  auto* cmd = app.add_subcommand(
      "tune",
      "Choose loader threads, prefetch, compute threads, pinned memory and the micro-batch "
      "from short trials of the real step; writes a tuned config");
  cmd->add_option("CONFIG", args.config, "YAML config to tune")->required();
  cmd->add_option("--set", args.overrides, "override a key before tuning (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--out", args.out, "the tuned config (default: CONFIG-STEM.tuned.yaml)");
  cmd->add_option("--log", args.log, "JSONL of every trial (default: OUT.trials.jsonl)");
  AddTuneOptions(cmd, args);
  cmd->add_option("--nproc", args.world_size,
                  "ranks the tuned config will train with (the trials run one rank's share on "
                  "this host's cores divided by them)")
      ->check(CLI::Range(1, 4096));
  cmd->callback([] { RunTune(args); });
}

}  // namespace topspin::cli
