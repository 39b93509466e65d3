// bench train-gpt: our GPT training (`model.kind: gpt` through the trainer
// core) against the same model and optimizer in PyTorch as nanoGPT writes
// it (bench/peers/gpt_pytorch.py), eager and torch.compile, in fp32 and
// bf16, in the same run, with MFU against the matmul peak measured here.
#include "cli/benches.h"
#include "topspin/core/error.h"

#ifdef TOPSPIN_HAVE_TORCH

#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/run_command.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/train/device.h"
#include "topspin/train/trainer.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

// A run logged every `warmup` steps, over the `timed` steps after the
// first `warmup` (a multiple of it): steady-state tokens/s from the
// records' times, and the mean training loss (the last step, which
// checkpoints, is left out).
struct Steady {
  double tokens_per_s = 0;
  double mean_loss = 0;
};
Steady SteadyState(const fs::path& run, int warmup, int timed, double tokens_per_step) {
  std::ifstream in(run / "metrics.jsonl");
  std::map<int64_t, std::pair<double, double>> at;  // step -> time, window loss
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      at[j.at("step").get<int64_t>()] = {j.at("time").get<double>(), j.at("loss").get<double>()};
    }
  }
  const auto a = at.find(warmup), b = at.find(warmup + timed);
  if (a == at.end() || b == at.end() || b->second.first <= a->second.first) {
    throw InternalError(fmt::format("bench train-gpt: {} lacks the records of steps {} and {}",
                                    (run / "metrics.jsonl").string(), warmup, warmup + timed));
  }
  Steady s{double(timed) * tokens_per_step / (b->second.first - a->second.first), 0};
  for (auto it = std::next(a); it != std::next(b); ++it) s.mean_loss += it->second.second;
  s.mean_loss /= double(timed / warmup);  // windows of equal length
  return s;
}

GptShape TrainGptBenchShape(const TrainGptBenchOptions& o) {
  return {.vocab = o.vocab, .context = o.context, .layers = o.layers, .d_model = o.d_model,
          .heads = o.heads, .d_ff = 4 * o.d_model, .tied_embeddings = true};
}

// Our run of `shape` on `data` in `precision` with config `overrides`
// (the speed-up switches): steady-state tokens/s and mean loss.
Steady RunOurs(const TrainGptBenchOptions& o, const fs::path& data, const GptShape& shape,
               const char* precision, const std::vector<std::string>& overrides, int steps,
               int timed, double tokens_per_step) {
  const fs::path run = o.scratch / fmt::format("bench-gpt-run-{}", precision);
  fs::remove_all(run);
  // AdamW without weight decay on both sides (ours decays every
  // parameter, nanoGPT the matrices only: with none the maths is one).
  const std::string yaml = fmt::format(R"yaml(
run: {{seed: {}}}
data: {{train: "{}"}}
pipeline: {{threads: 1, batch_size: {}, shuffle: global}}
model:
  kind: gpt
  gpt: {{vocab: {}, context: {}, layers: {}, d_model: {}, heads: {}}}
optim: {{lr: 0.0006, beta2: 0.95, weight_decay: 0.0, schedule: constant, warmup_steps: 0,
         clip_norm: 1.0}}
train: {{steps: {}, log_every: {}, eval_every: 0, checkpoint_every: 0, precision: {},
         torch_threads: {}, device: {}}}
)yaml",
                                       o.seed, data.string(), o.batch, shape.vocab, shape.context,
                                       shape.layers, shape.d_model, shape.heads, steps, o.warmup,
                                       precision, o.threads, o.device);
  const Config config = Config::Parse(yaml, "<bench train-gpt>", overrides, TopspinSchema());
  ApplyProcessPolicy(o.threads);
  Train(config, {.run_dir = run});
  const Steady steady = SteadyState(run, o.warmup, timed, tokens_per_step);
  fs::remove_all(run);
  return steady;
}

// The speed-ups docs/BENCHMARKS.md measures on and off: the config keys
// that turn each off (the default is on). TF32, pinned copies and CUDA
// graphs act on CUDA only; bf16 has rows of its own.
struct Switch {
  const char* name;
  std::vector<std::string> off;
};
const std::vector<Switch>& Switches() {
  static const std::vector<Switch> kSwitches = {
      {"causal mask on the fly (is_causal) vs stored", {"model.gpt.attention=sdpa_mask"}},
      {"fused attention (SDPA) vs composed", {"model.gpt.attention=composed"}},
      {"fused LayerNorm + GELU vs composed", {"model.gpt.fused_ops=false"}},
      {"fused AdamW vs composed ops", {"optim.fused=false"}},
      {"vocabulary padded to 64 vs not", {}},  // on: vocab_multiple 64; off: as it is
      {"TF32 matmuls vs fp32 (CUDA)", {"train.tf32=false"}},
  };
  return kSwitches;
}

}  // namespace

BenchTable RunTrainGptBench(const TrainGptBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path corpus = o.scratch / "bench-gpt-corpus.txt", data = o.scratch / "bench-gpt-data";
  for (const auto& p : {corpus, data}) fs::remove_all(p);
  const GptShape shape = TrainGptBenchShape(o);
  std::vector<bool> passes;  // bf16 or not
  if (o.fp32) passes.push_back(false);
  if (o.bf16) passes.push_back(true);
  if (o.compare && passes.empty()) {
    throw Error(ErrorKind::kUsage, "bench train-gpt: --no-fp32 and --no-bf16 leave nothing to compare",
                {}, "drop one of them, or pass --switches-only");
  }
  BenchStages stages("train-gpt", 1 + (o.compare ? 3 * int(passes.size()) : 0) +
                                      (o.switches ? int(Switches().size()) : 0));
  stages.Begin("data: gen text, byte tokens");
  const TextCorpusSummary text = WriteTextCorpus(corpus, TextCorpusOptions{});
  Convert({corpus}, ImportOptions{.format = "text"},
          DatasetWriterOptions{.out = data, .threads = 1}, /*sort_groups=*/false, {});

  // PaLM's and nanoGPT's count, as the issue states it: 6 N + 12 L d T
  // (N every parameter, the tied head once).
  const double n_params = double(ParameterCount(shape));
  const double flops_per_token =
      6 * n_params + 12.0 * double(shape.layers * shape.d_model * shape.context);
  const double tokens_per_step = double(o.batch * shape.context);
  // The timed steps are whole log windows of `warmup` steps.
  const int timed = (o.steps + o.warmup - 1) / o.warmup * o.warmup;
  const int steps = o.warmup + timed + 1;
  torch::set_num_threads(o.threads);

  BenchTable t{"train-gpt", "", {}};
  double peak_fp32 = 0, peak_bf16 = 0;
  for (const bool bf16 : o.compare ? passes : std::vector<bool>{}) {
    const char* precision = bf16 ? "bf16" : "fp32";
    stages.Begin(fmt::format("ours ({}): {} steps", precision, steps));
    const Steady steady = RunOurs(o, data, shape, precision, {}, steps, timed, tokens_per_step);
    const double ours_tps = steady.tokens_per_s;
    const double peak = MeasureMatmulPeak(ResolveDevice(o.device, VisibleGpus(), 0), bf16);
    (bf16 ? peak_bf16 : peak_fp32) = peak;

    nlohmann::json peers[2];
    for (const bool compiled : {false, true}) {
      stages.Begin(fmt::format("PyTorch peer ({}, {})", compiled ? "torch.compile" : "eager",
                               precision));
      const fs::path script = o.peers / "gpt_pytorch.py";
      peers[compiled] = nlohmann::json::parse(RunPeer(
          fmt::format("{} '{}' '{}' --layers {} --d-model {} --heads {} --context {} --vocab {} "
                      "--batch {} --steps {} --warmup {} --threads {} --seed {} "
                      "--weight-decay 0 --device {}{}{} 2>&1",
                      PeerPython(), script.string(), corpus.string(), shape.layers, shape.d_model,
                      shape.heads, shape.context, shape.vocab, o.batch, timed, o.warmup,
                      o.threads, o.seed, o.device, bf16 ? " --bf16" : "",
                      compiled ? " --compile" : ""),
          script.string()));
    }
    const std::string name = fmt::format("GPT training {}", precision);
    t.rows.push_back({name, ours_tps, "PyTorch eager (nanoGPT)",
                      peers[0]["tokens_per_s"].get<double>(), "tokens/s"});
    t.rows.push_back({name, ours_tps, "PyTorch torch.compile",
                      peers[1]["tokens_per_s"].get<double>(), "tokens/s"});
    // ours / floor is the MFU.
    t.rows.push_back({name, ours_tps, fmt::format("matmul peak {:.0f} GFLOP/s", peak / 1e9),
                      peak / flops_per_token, "tokens/s"});
    // The same model and optimizer: the same loss curve, to the noise of
    // different windows (both start near ln vocab: 5.55 for bytes).
    t.rows.push_back({fmt::format("mean loss, steps {}-{} ({})", o.warmup + 1, o.warmup + timed,
                                  precision),
                      steady.mean_loss, "PyTorch eager", peers[0]["mean_loss"].get<double>(),
                      "nats", Better::kLower});
    if (bf16 == passes.front()) {
      t.rows.push_back({"parameters", n_params, "PyTorch (same model)",
                        peers[0]["params"].get<double>(), ""});
    }
  }
  if (o.switches) {
    // Each switch off against all on (fp32), back to back.
    for (const Switch& sw : Switches()) {
      const bool cuda_only = std::string_view(sw.name).ends_with("(CUDA)");
      if (cuda_only && o.device == "cpu") continue;
      const bool padding = sw.off.empty();
      const std::vector<std::string> on =
          padding ? std::vector<std::string>{"model.gpt.vocab_multiple=64"} : std::vector<std::string>{};
      stages.Begin(fmt::format("switch: {}", sw.name));
      const double with = RunOurs(o, data, shape, "fp32", on, steps, timed, tokens_per_step).tokens_per_s;
      const double without =
          RunOurs(o, data, shape, "fp32", sw.off, steps, timed, tokens_per_step).tokens_per_s;
      t.rows.push_back({fmt::format("switch: {}", sw.name), with, "off", without, "tokens/s"});
    }
  }
  t.setup = fmt::format(
      "GPT {} layers x {} wide, {} heads, context {}, vocabulary {} (byte tokens), tied head ({:.2f}M "
      "parameters) on the {}; batch {} sequences, {} warm-up + {} timed steps, {} threads; AdamW "
      "lr 6e-4 "
      "(0.9, 0.95), no weight decay, clip 1; data: {} MB of gen text (byte tokens). FLOPs per "
      "token 6N + 12 L d T = {:.1f} M; MFU = ours / the matmul-peak row ({}). The peer draws nanoGPT's random windows, we the pipeline's shuffled ones.",
      shape.layers, shape.d_model, shape.heads, shape.context, shape.vocab, n_params / 1e6,
      o.device, o.batch, o.warmup, timed, o.threads, double(text.bytes) / 1e6, flops_per_token / 1e6,
      [&] {
        std::string peaks;
        if (peak_fp32 > 0) peaks = fmt::format("fp32 peak {:.0f} GFLOP/s", peak_fp32 / 1e9);
        if (peak_bf16 > 0) {
          peaks += fmt::format("{}bf16 peak {:.0f} GFLOP/s", peaks.empty() ? "" : ", ",
                               peak_bf16 / 1e9);
        }
        return peaks.empty() ? std::string("no comparison run") : peaks;
      }());
  for (const auto& p : {corpus, data}) fs::remove_all(p);
  return t;
}

}  // namespace topspin::cli

#else

namespace topspin::cli {
BenchTable RunTrainGptBench(const TrainGptBenchOptions&) {
  throw Error(ErrorKind::kUsage, "bench train-gpt needs the LibTorch build", {},
              "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
}
}  // namespace topspin::cli

#endif
