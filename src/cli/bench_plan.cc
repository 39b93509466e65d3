// topspin bench plan: the planner against its peers in the same run.
//   - The scaling-law fit on noisy synthetic runs (Epoch AI's law, 0.2%
//     noise) against the same fit in SciPy (bench/peers/scaling_scipy.py):
//     the constants must agree, then the wall time of the 4,500 starts.
//   - With LibTorch, `plan memory` against the peak the tuner's counting
//     allocator measures for the real GPT step, for five configs.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/plan/scaling_law.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/core/config_schema.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/plan/memory_plan.h"
#include "topspin/train/tune.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

// 35 runs over 70M-16B parameters and 2-200 tokens per parameter.
std::string SyntheticRunsCsv(uint64_t seed) {
  const ScalingLaw law = EpochLaw();
  PhiloxStream rng(seed);
  std::string csv = "N,D,loss\n";
  for (double n = 7e7; n < 1.7e10; n *= 3) {
    for (const double ratio : {2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0}) {
      const double loss = law.Loss(n, n * ratio) * std::exp(0.002 * rng.NextNormal());
      csv += fmt::format("{:.17g},{:.17g},{:.17g}\n", n, n * ratio, loss);
    }
  }
  return csv;
}

void AddFitRows(const PlanBenchOptions& o, BenchTable& table) {
  const fs::path csv = o.scratch / "bench-plan-runs.csv";
  WriteFileAtomic(csv, SyntheticRunsCsv(o.seed));
  const std::vector<ScalingRun> runs = ReadScalingCsv(csv);
  ScalingFitOptions fit_options;
  fit_options.bootstrap = 0;
  fit_options.threads = o.threads;
  ScalingFit fit;
  const double ours_s = BestSeconds(o.repeats, [&] { fit = FitScalingLaw(runs, fit_options); });

  const fs::path script = o.peers / "scaling_scipy.py";
  const nlohmann::json peer = nlohmann::json::parse(RunPeer(
      // One timed fit: SciPy's takes minutes, and its spread is small
      // against the gap.
      fmt::format("{} '{}' '{}' 1 {} 2>&1", PeerPython(), script.string(), csv.string(), o.threads),
      script.string()));
  fs::remove(csv);

  // The same minimum, or the timing compares different work.
  const auto same = [&](const char* name, double ours, double theirs, double tolerance) {
    if (std::abs(ours - theirs) > tolerance * std::max(1.0, std::abs(theirs))) {
      throw InternalError(fmt::format("bench plan: the fits disagree on {}: ours {}, SciPy's {}",
                                      name, ours, theirs));
    }
    table.rows.push_back({fmt::format("fit: {}", name), ours, "SciPy L-BFGS-B", theirs, "",
                          Better::kSame});
  };
  same("E", fit.law.E, peer.at("E").get<double>(), 1e-3);
  same("alpha", fit.law.alpha, peer.at("alpha").get<double>(), 1e-3);
  same("beta", fit.law.beta, peer.at("beta").get<double>(), 1e-3);
  same("log A", std::log(fit.law.A), std::log(peer.at("A").get<double>()), 1e-3);
  same("log B", std::log(fit.law.B), std::log(peer.at("B").get<double>()), 1e-3);
  const ScalingLaw theirs{.E = peer.at("E"), .A = peer.at("A"), .B = peer.at("B"),
                          .alpha = peer.at("alpha"), .beta = peer.at("beta")};
  same("tokens/param at 5.76e23", ComputeOptimalFor(fit.law, 5.76e23).tokens_per_parameter,
       ComputeOptimalFor(theirs, 5.76e23).tokens_per_parameter, 1e-2);
  table.rows.push_back({fmt::format("fit: {} starts, {} runs", fit.starts, runs.size()), ours_s,
                        fmt::format("SciPy, {} processes", o.threads),
                        peer.at("seconds").get<double>(), "s", Better::kLower});
}

#ifdef TOPSPIN_HAVE_TORCH
void AddMemoryRows(const PlanBenchOptions& o, BenchTable& table) {
  const fs::path text = o.scratch / "bench-plan-text";
  fs::remove_all(text);
  fs::create_directories(text);
  WriteTextCorpus(text / "corpus.txt", TextCorpusOptions{.max_bytes = 40000});
  Convert({text / "corpus.txt"}, ImportOptions{.format = "text"},
          DatasetWriterOptions{.out = text / "data", .row_group_rows = 64, .threads = 1},
          /*sort_groups=*/false, {});
  const fs::path config = text / "gpt.yaml";
  WriteFileAtomic(config, fmt::format(R"yaml(
data: {{train: "{}"}}
pipeline: {{threads: 1, prefetch: 2, batch_size: 8, shuffle: global}}
model: {{kind: gpt, gpt: {{context: 64, layers: 2, d_model: 128, heads: 4}}}}
optim: {{lr: 0.003, warmup_steps: 0}}
train: {{steps: 10, torch_threads: 1, device: {}}}
)yaml",
                                      (text / "data").string(), o.device));
  struct Case {
    std::string name;
    std::vector<std::string> sets;
  };
  // On a GPU the shapes are larger, so that the cuBLAS workspaces (tens
  // of MiB, which the plan leaves to its reserve) stay small beside them.
  std::vector<Case> cases;
  if (o.device == "cuda") {
    const std::vector<std::string> gpu = {"model.gpt.context=512", "model.gpt.d_model=1024",
                                          "model.gpt.layers=4", "model.gpt.heads=16",
                                          "pipeline.batch_size=8"};
    cases.push_back({"d1024 L4 T512, batch 8", gpu});
    cases.push_back({"d1024 L4 T512, batch 8, bf16 autocast", gpu});
    cases.back().sets.push_back("train.precision=bf16");
  } else {
    cases = {
        {"d128 L2 T64, batch 16", {"pipeline.batch_size=16"}},
        {"d128 L2 T64, batch 64", {"pipeline.batch_size=64"}},
        {"d64 L4 T64, batch 32",
         {"pipeline.batch_size=32", "model.gpt.d_model=64", "model.gpt.layers=4"}},
        {"d128 L2 T64, batch 16, composed attention",
         {"pipeline.batch_size=16", "model.gpt.attention=composed"}},
        {"d128 L2 T64, batch 32, bf16 autocast", {"pipeline.batch_size=32", "train.precision=bf16"}},
    };
  }
  for (const Case& c : cases) {
    TuneRequest request;
    request.config = config;
    request.overrides = c.sets;
    request.memory_limit = "0.5";
    StepTrials trials(request);
    const Settings settings = Settings::From(Config::Load(config, c.sets, TopspinSchema()));
    const GptMemoryInputs in = GptMemoryInputsFrom(settings);
    const MemoryProbe probe = trials.Probe(in.micro_batch, trials.defaults());
    if (probe.oom) throw InternalError("bench plan: a memory probe ran out of memory: " + probe.error);
    table.rows.push_back({fmt::format("memory ({}): {}", o.device, c.name),
                          double(EstimateGptMemory(in).total_bytes) / double(1 << 20),
                          "measured peak", double(probe.peak_bytes) / double(1 << 20), "MiB",
                          Better::kSame});
  }
  fs::remove_all(text);
}
#else
void AddMemoryRows(const PlanBenchOptions&, BenchTable&) {}
#endif

}  // namespace

BenchTable RunPlanBench(const PlanBenchOptions& o) {
  fs::create_directories(o.scratch);
#ifdef TOPSPIN_HAVE_TORCH
  const char* memory = "";
#else
  const char* memory = " (skipped: no LibTorch)";
#endif
  const std::string fit =
      o.memory_only ? ""
                    : fmt::format("fit: 35 runs from Epoch AI's law with 0.2% noise (seed {}), Huber "
                                  "1e-3, L-BFGS from Chinchilla's 4,500 starts on {} threads, ours "
                                  "best of {}, SciPy's one run; ",
                                  o.seed, o.threads, o.repeats);
  BenchTable table{"plan",
                   fmt::format("{}memory: plan memory vs the measured peak (the CPU's counting "
                               "allocator, CUDA's caching allocator) over building the trainer and "
                               "2 real steps on {}{}",
                               fit, o.device, memory),
                   {}};
  BenchStages stages("plan", o.memory_only ? 1 : 2);
  if (!o.memory_only) {
    stages.Begin("scaling fit: ours and SciPy's (bench/peers/scaling_scipy.py)");
    AddFitRows(o, table);
  }
  stages.Begin("memory: plan memory against the measured peak of the real step");
  AddMemoryRows(o, table);
  return table;
}

}  // namespace topspin::cli
