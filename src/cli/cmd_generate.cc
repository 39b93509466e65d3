// topspin generate RUN_DIR|CHECKPOINT --prompt TEXT [--max-new-tokens N]
// [--temperature T] [--top-k K] [--top-p P] [--seed S] [--tokenizer SPEC]
// [--config FILE] [--set k=v]... [--json FILE]: text from a trained GPT
// (topspin/train/gpt_inference.h GenerateText), streamed to the terminal
// as it is made; the same seed gives the same text. The statistics go to
// stderr, so stdout is the prompt and the text alone.
#include <cstdio>
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
#include "topspin/train/trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string checkpoint;
  std::string which = "best";
  std::string prompt;
  int64_t max_new_tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::string tokenizer;
  bool no_stop = false;
  std::string config;
  std::vector<std::string> overrides;
  std::string json;
  std::string prompt_logits;
};

void RunGenerate(const GenerateArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const fs::path checkpoint(args.checkpoint);
  CheckCheckpointDir(checkpoint);
  const fs::path config_path = args.config.empty() ? RunConfigOf(checkpoint) : fs::path(args.config);
  const Config config = Config::Load(config_path.string(), args.overrides, TopspinSchema());
  const Settings settings = Settings::From(config);
  ApplyProcessPolicy(settings.train.torch_threads);
  SetLogLevel(settings.run.log_level);
  GenerateOptions o{.prompt = args.prompt,
                    .max_new_tokens = args.max_new_tokens,
                    .sampling = {.temperature = args.temperature,
                                 .top_k = args.top_k,
                                 .top_p = args.top_p},
                    .seed = args.seed,
                    .tokenizer = args.tokenizer,
                    .stop_at_end_of_text = !args.no_stop,
                    .choice = args.which == "latest" ? CheckpointChoice::kLatest
                                                     : CheckpointChoice::kBest,
                    .prompt_logits = args.prompt_logits};
  fmt::print("{}", args.prompt);
  std::fflush(stdout);
  const GenerateResult r = GenerateText(config, checkpoint, o, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  fmt::print("\n");
  std::fflush(stdout);
  fmt::print(stderr, "checkpoint    {} (step {}), tokenizer {}\n", r.checkpoint.string(), r.step,
             r.tokenizer);
  fmt::print(stderr, "generated     {} tokens after a prompt of {} in {:.2f} s ({:.1f} tokens/s){}\n",
             r.new_tokens, r.prompt_tokens, r.seconds, r.tokens_per_s,
             r.ended ? "; the model ended the document" : "");
  if (!args.json.empty()) {
    const nlohmann::json out{{"checkpoint", r.checkpoint.string()},
                             {"step", r.step},
                             {"tokenizer", r.tokenizer},
                             {"prompt", args.prompt},
                             {"text", r.text},
                             {"prompt_tokens", r.prompt_tokens},
                             {"new_tokens", r.new_tokens},
                             {"prompt_ids", r.prompt_ids},
                             {"ids", r.new_ids},
                             {"ended", r.ended},
                             {"seed", args.seed},
                             {"temperature", args.temperature},
                             {"top_k", args.top_k},
                             {"top_p", args.top_p},
                             {"tokens_per_s", r.tokens_per_s}};
    // A young byte-level model can emit bytes that are not UTF-8: they
    // become U+FFFD in the JSON (the terminal got them as they are).
    WriteFileAtomic(args.json,
                    out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which generation needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  static GenerateArgs args;
  auto* cmd = app.add_subcommand("generate", "Generate text with a trained GPT (model.kind gpt)");
  AddCheckpointArgs(cmd, args.checkpoint, args.which);
  cmd->add_option("--prompt", args.prompt, "text to continue (\"\": a new document)");
  cmd->add_option("--max-new-tokens", args.max_new_tokens, "tokens to generate at most")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--temperature", args.temperature,
                  "softmax temperature: 0 greedy, below 1 more likely text, above 1 more varied")
      ->capture_default_str();
  cmd->add_option("--top-k", args.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", args.top_p,
                  "sample among the most likely tokens whose probabilities sum to p (1: all)")
      ->capture_default_str();
  cmd->add_option("--seed", args.seed, "sampling seed: the same seed gives the same text")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args.tokenizer,
                  "bytes, sentencepiece:MODEL or gpt2:DIR (default: the checkpoint's own)");
  cmd->add_flag("--no-stop", args.no_stop,
                "go on past the end-of-text token (default: stop when the model ends the document)");
  cmd->add_option("--config", args.config, "config of the run (default: the run's config.yaml)");
  cmd->add_option("--set", args.overrides, "override a key, e.g. --set train.device=cpu")
      ->allow_extra_args(false);
  cmd->add_option("--json", args.json,
                  "also write the text, its token ids and its statistics as JSON");
  cmd->add_option("--prompt-logits", args.prompt_logits,
                  "write the logits of the prompt's positions to this safetensors file (tensor "
                  "\"logits\" [tokens, vocab] float32), to compare with another implementation");
  cmd->callback([] { RunGenerate(args); });
}

}  // namespace topspin::cli
