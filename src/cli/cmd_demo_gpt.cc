// topspin demo gpt: the GPT workload end to end in a few minutes: the text
// of /usr/share/common-licenses (the licences every Debian machine ships)
// as byte tokens -> a small GPT trained through the trainer core, with
// progress, ETA and a falling loss -> a sample generated from its best
// checkpoint. Everything lands in a run directory that `topspin report`
// plots.
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/run_dir.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/gpt_inference.h"
#include "topspin/train/trainer.h"
#endif

namespace topspin::cli {
namespace {

struct DemoGptArgs {
  std::vector<std::string> overrides;
  int64_t steps = 500;
  std::string prompt = "The ";
};

// 4 blocks of 256 (3.2M parameters), context 128: about 4 steps a second
// on 2 cores, and a loss that falls from ln 257 = 5.55 to about 1.5.
constexpr const char* kDemoGptConfig = R"yaml(
run: {{name: demo-gpt, seed: 1}}
data: {{train: "{0}", valid: "{0}"}}
pipeline: {{threads: 1, batch_size: 16, shuffle: global}}
model:
  kind: gpt
  gpt: {{vocab: 257, context: 128, layers: 4, d_model: 256, heads: 4}}
optim: {{lr: 0.002, warmup_steps: {1}, schedule: cosine, min_lr_ratio: 0.1, weight_decay: 0.1,
         clip_norm: 1.0}}
train: {{steps: {2}, log_every: {3}, eval_every: {4}, eval_batches: 16, checkpoint_every: {4}}}
)yaml";

void RunDemoGpt(const DemoGptArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const auto yaml = [&](const std::string& data) {
    const int64_t s = args.steps;
    return fmt::format(kDemoGptConfig, data, std::max<int64_t>(1, s / 20), s,
                       std::max<int64_t>(1, s / 25), std::max<int64_t>(1, s / 5));
  };
  const Config first = Config::Parse(yaml("data"), "<demo gpt>", args.overrides, TopspinSchema());
  const Settings base = Settings::From(first);
  SetLogLevel(base.run.log_level);
  const auto dir = CreateRunDirectory(base.run.dir, base.run.name, first);
  const auto data = dir / "data" / "text";
  const Config config =
      Config::Parse(yaml(data.string()), "<demo gpt>", args.overrides, TopspinSchema());
  fmt::print("topspin demo gpt  config hash {}\n", config.Hash());
  fmt::print("run directory {}\n", dir.string());

  const TextCorpusSummary corpus = WriteTextCorpus(dir / "data" / "corpus.txt", TextCorpusOptions{});
  const Manifest m = Convert({dir / "data" / "corpus.txt"}, ImportOptions{.format = "text"},
                             DatasetWriterOptions{.out = data, .threads = 1},
                             /*sort_groups=*/false, {});
  fmt::print("corpus        {} files of /usr/share/common-licenses: {} bytes, one byte token each "
             "(vocabulary 257), {} shard(s)\n",
             corpus.files, corpus.bytes, m.shards.size());
  const Settings settings = Settings::From(config);
  fmt::print("model         GPT {} layers x {}, {} heads, context {}; {} steps of {} windows "
             "(validation: the training text)\n",
             settings.model.gpt.layers, settings.model.gpt.d_model, settings.model.gpt.heads,
             settings.model.gpt.context, settings.train.steps, settings.pipeline.batch_size);
  std::fflush(stdout);
  ApplyProcessPolicy(settings.train.torch_threads);
  const TrainResult r = Train(config, {.run_dir = dir});
  fmt::print("trained       {} steps, {:.0f} tokens/s, last loss {:.3f}; valid loss {:.3f}, "
             "perplexity {:.2f} (from ln 257 = 5.55)\n",
             r.step, r.items_per_s, r.last_loss, r.valid.at("loss"), r.valid.at("perplexity"));
  fmt::print("sample        (temperature 0.8, top-k 40, seed 1)\n\n{}", args.prompt);
  std::fflush(stdout);
  const GenerateResult g = GenerateText(
      config, dir,
      {.prompt = args.prompt, .max_new_tokens = 300, .sampling = {.temperature = 0.8, .top_k = 40},
       .seed = 1},
      [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
  fmt::print("\n\ngenerated     {} tokens at {:.0f} tokens/s from {}\n", g.new_tokens,
             g.tokens_per_s, g.checkpoint.string());
  fmt::print("next          topspin report {0}   (loss, validation, throughput, phases)\n"
             "              topspin generate {0} --prompt \"It is\" --seed 2\n",
             dir.string());
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which demo gpt needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void RegisterDemoGpt(CLI::App& demo) {
  static DemoGptArgs args;
  auto* cmd = demo.add_subcommand(
      "gpt", "Train a small byte-level GPT on the Debian licence texts for a few minutes, then "
             "generate a sample");
  cmd->add_option("--set", args.overrides, "override a key: --set model.gpt.layers=2 (repeatable)");
  cmd->add_option("--steps", args.steps, "training steps (500: about two minutes on 2 cores)")
      ->check(CLI::Range(int64_t{10}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--prompt", args.prompt, "what the sample continues")->capture_default_str();
  cmd->callback([] { RunDemoGpt(args); });
}

}  // namespace topspin::cli
