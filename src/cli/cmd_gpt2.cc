// topspin import gpt2 --from HF_DIR --to RUN_DIR
// topspin export gpt2 RUN_DIR|CHECKPOINT --to HF_DIR [--checkpoint best|latest]
// Hugging Face GPT-2 directories in and out (topspin/train/gpt2_interop.h).
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/gpt2_interop.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct Gpt2Args {
  std::string from, to, checkpoint, which = "best", config;
};

[[noreturn]] void NeedTorch() {
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which GPT-2 import "
                                 "and export need",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
}

void RunImport(const Gpt2Args& a) {
#ifdef TOPSPIN_HAVE_TORCH
  const Gpt2ImportResult r = ImportGpt2(a.from, a.to);
  fmt::print("imported      {} ({} layers, d_model {}, {} heads, context {}, vocab {}: {:.1f}M "
             "parameters)\n",
             a.from, r.shape.layers, r.shape.d_model, r.shape.heads, r.shape.context,
             r.shape.vocab, double(r.parameters) / 1e6);
  fmt::print("run           {}  (config.yaml, {})\n", r.run_dir.string(), r.checkpoint.string());
  fmt::print("tokenizer     {}\n", r.tokenizer.empty()
                                       ? "none (no vocab.json + merges.txt): pass --tokenizer to "
                                         "generate"
                                       : "GPT-2 byte-level BPE (vocab.json, merges.txt)");
  fmt::print("next          topspin generate {} --prompt \"...\"\n", r.run_dir.string());
#else
  (void)a;
  NeedTorch();
#endif
}

void RunExport(const Gpt2Args& a) {
#ifdef TOPSPIN_HAVE_TORCH
  const fs::path checkpoint(a.checkpoint);
  CheckCheckpointDir(checkpoint);
  const fs::path config_path = a.config.empty() ? RunConfigOf(checkpoint) : fs::path(a.config);
  const Config config = Config::Load(config_path.string(), {}, TopspinSchema());
  const Gpt2ExportResult r =
      ExportGpt2(config, checkpoint, a.to,
                 a.which == "latest" ? CheckpointChoice::kLatest : CheckpointChoice::kBest);
  fmt::print("exported      {} ({:.1f}M parameters)\n", r.checkpoint.string(),
             double(r.parameters) / 1e6);
  fmt::print("to            {}  (config.json, model.safetensors{})\n", r.out_dir.string(),
             r.tokenizer ? ", vocab.json, merges.txt, tokenizer_config.json" : "");
  fmt::print("load with     transformers.GPT2LMHeadModel.from_pretrained(\"{}\")\n",
             r.out_dir.string());
#else
  (void)a;
  NeedTorch();
#endif
}

}  // namespace

void RegisterGpt2(CLI::App& app) {
  static Gpt2Args args;
  auto* import = app.add_subcommand("import", "Bring models from other tools into topspin runs");
  import->require_subcommand(1);
  auto* in = import->add_subcommand(
      "gpt2", "A Hugging Face GPT-2 directory (save_pretrained: config.json, model.safetensors, "
              "vocab.json + merges.txt) as a run directory generate, eval and train "
              "--init-from take");
  in->add_option("--from", args.from, "the Hugging Face directory")->required()->check(
      CLI::ExistingDirectory);
  in->add_option("--to", args.to, "the run directory to make (new or empty)")->required();
  in->callback([] { RunImport(args); });

  auto* exp = app.add_subcommand("export", "Write topspin models in other tools' formats");
  exp->require_subcommand(1);
  auto* out = exp->add_subcommand(
      "gpt2", "A GPT run's checkpoint as a Hugging Face GPT-2 directory that "
              "transformers' GPT2LMHeadModel.from_pretrained loads");
  AddCheckpointArgs(out, args.checkpoint, args.which);
  out->add_option("--to", args.to, "the Hugging Face directory to write")->required();
  out->add_option("--config", args.config, "config of the run (default: the run's config.yaml)");
  out->callback([] { RunExport(args); });
}

}  // namespace topspin::cli
