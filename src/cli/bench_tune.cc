// bench tune: the AutoTuner against an exhaustive grid over the same knob
// space and against the defaults, on the ranker and a small GPT, through
// the real step (topspin/train/tune.h); and its batch-size search against
// Lightning's finder (doubling, then binary search) through the same step.
#include "cli/benches.h"
#include "topspin/core/error.h"

#ifdef TOPSPIN_HAVE_TORCH

#include <chrono>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_shop.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/pipeline/shop_features.h"
#include "topspin/train/trainer.h"
#include "topspin/train/tune.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

// Windows of `a` and `b` in turns: the means, as the machine was for both.
std::pair<double, double> InTurns(StepTrials& trials, const TuneKnobs& a, const TuneKnobs& b,
                                  int rounds) {
  TrialOutcome oa, ob;
  for (int i = 0; i < rounds; ++i) {
    const TrialOutcome x = trials.Run(a, 1), y = trials.Run(b, 1);
    oa.windows.insert(oa.windows.end(), x.windows.begin(), x.windows.end());
    ob.windows.insert(ob.windows.end(), y.windows.begin(), y.windows.end());
  }
  return {oa.Mean(), ob.Mean()};
}

void BenchWorkload(const std::string& name, const fs::path& config, const TuneBenchOptions& o,
                   BenchStages& stages, BenchTable& table) {
  TuneRequest request;
  request.config = config;
  request.window_s = o.window_s;
  request.memory_limit = "0.8";
  request.use_cache = false;
  const TuneOptions topt{.budget_s = o.budget_s};

  stages.Begin(name + ": the tuner");
  auto trials_owner = std::make_unique<StepTrials>(request);
  StepTrials& trials = *trials_owner;
  const TuneKnobs defaults = trials.defaults();
  const TuneSpace space = trials.space();
  const ThroughputResult tuned = TuneThroughput(trials, defaults, space, topt, {defaults});
  double tuner_s = tuned.seconds;

  stages.Begin(fmt::format("{}: the grid (loader 1..{} x prefetch 1..{} x compute 1..{})", name,
                           space.max_loader_threads, space.max_prefetch,
                           space.max_compute_threads));
  TuneKnobs grid_best = defaults;
  double grid_best_rate = 0, grid_s = 0;
  int grid_settings = 0;
  for (int64_t t = 1; t <= space.max_loader_threads; ++t) {
    for (int64_t p = 1; p <= space.max_prefetch; p *= 2) {
      for (int64_t c = 1; c <= space.max_compute_threads; ++c) {
        TuneKnobs k = defaults;
        k.loader_threads = t;
        k.prefetch = p;
        k.compute_threads = c;
        const TrialOutcome r = MeasureUntilKnown(trials, k, topt);  // as the tuner measures
        grid_s += r.seconds;
        ++grid_settings;
        if (r.Mean() > grid_best_rate) {
          grid_best_rate = r.Mean();
          grid_best = k;
        }
      }
    }
  }
  stages.Begin(name + ": the tuner's pick, the grid's best and the defaults in turns");
  const auto [tuner_rate, grid_rate] = InTurns(trials, tuned.best, grid_best, o.rounds);
  const auto [tuner_rate2, default_rate] = InTurns(trials, tuned.best, defaults, o.rounds);
  const std::string unit = trials.unit() + "/s";
  table.rows.push_back({fmt::format("{}: tuned ({}) vs the grid's best ({}), in turns", name,
                                    tuned.best.Describe(), grid_best.Describe()),
                        tuner_rate, "grid best", grid_rate, unit, Better::kHigher});
  table.rows.push_back({fmt::format("{}: tuner time ({} settings) vs grid time ({} settings)",
                                    name, tuned.distinct_settings, grid_settings),
                        tuner_s, "grid", grid_s, "s", Better::kLower});
  table.rows.push_back({fmt::format("{}: tuned vs the defaults ({}), in turns", name,
                                    defaults.Describe()),
                        tuner_rate2, "defaults", default_rate, unit, Better::kHigher});

  trials_owner.reset();  // its trainer's memory, and its allocator hook

  // The batch: a memory wall placed at `o.wall` times the configured
  // micro-batch (from two setup probes, counted for neither side).
  stages.Begin(name + ": batch size, ours vs Lightning's finder");
  const int64_t b0 = defaults.micro_batch;
  TuneRequest free_request = request;
  free_request.free_batch = true;
  auto setup = std::make_unique<StepTrials>(free_request);
  const std::vector<int64_t> allowed = setup->AllowedBatches();
  const MemoryProbe p1 = setup->Probe(b0, defaults), p2 = setup->Probe(2 * b0, defaults);
  setup.reset();
  const MemoryModel wall_model =
      MemoryModel::Through(b0, double(p1.peak_bytes), 2 * b0, double(p2.peak_bytes));
  const int64_t wall_batch =
      std::min<int64_t>(int64_t(o.wall * double(b0)), allowed.back() * 3 / 4);
  const auto limit = uint64_t(wall_model.Predict(wall_batch));
  free_request.memory_limit = fmt::format("{}", limit);
  StepTrials batch_trials(free_request);
  const auto probe = [&](int64_t b) { return batch_trials.Probe(b, defaults); };
  const BatchSearchResult ours =
      SearchBatch(probe, {.limit_bytes = limit, .margin = 0.10, .allowed = allowed,
                          .first_probe = b0});
  const LightningResult lightning = LightningBatchFinder(probe, 2, allowed.back(), limit);
  table.rows.push_back({fmt::format("{}: batch-size trials under {} (wall near batch {})", name,
                                    FormatBytes(limit), wall_batch),
                        double(ours.probes.size()), "Lightning doubling + binary search",
                        double(lightning.trials), "trials", Better::kLower});
  table.rows.push_back(
      {fmt::format("{}: batch chosen (peak {} under 90% of the limit) vs the largest that fits",
                   name, FormatBytes(ours.peak_bytes)),
       double(ours.batch), "Lightning's (no margin)", double(lightning.batch), "samples",
       Better::kHigher});
}

// The licence-text corpus as byte tokens, in text/data.
void WriteByteTokens(const fs::path& text) {
  fs::create_directories(text);
  WriteTextCorpus(text / "corpus.txt", TextCorpusOptions{});
  Convert({text / "corpus.txt"}, ImportOptions{.format = "text"},
          DatasetWriterOptions{.out = text / "data", .threads = 1}, /*sort_groups=*/false, {});
}

// --batch-config: the batch search at the device's real memory (no wall
// placed by the bench), against Lightning's finder under the same limit,
// which finds the largest batch that fits (no margin).
BenchTable BatchAtTheRealLimit(const TuneBenchOptions& o, const fs::path& text) {
  BenchStages stages("tune", 3);
  stages.Begin("data: the licence-text corpus, byte tokens");
  WriteByteTokens(text);
  TuneRequest request;
  request.config = o.batch_config;
  request.overrides = o.sets;
  request.overrides.push_back("data.train=" + (text / "data").string());
  request.overrides.push_back("train.device=" + o.device);
  request.memory_limit = o.memory_limit;
  request.margin = o.margin;
  request.free_batch = true;
  request.use_cache = false;
  ApplyProcessPolicy(0);
  StepTrials trials(request);
  const std::vector<int64_t> allowed = trials.AllowedBatches();
  const uint64_t limit = trials.limit_bytes();
  const TuneKnobs base = trials.defaults();
  const auto probe = [&](int64_t b) { return trials.Probe(b, base); };
  stages.Begin(fmt::format("ours: batch search under {} ({:.0f}% margin)", FormatBytes(limit),
                           100 * o.margin));
  const auto t0 = std::chrono::steady_clock::now();
  const BatchSearchResult ours = SearchBatch(
      probe, {.limit_bytes = limit, .margin = o.margin, .allowed = allowed,
              .first_probe = base.micro_batch});
  const double ours_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ours.batch == 0) {
    throw Error(ErrorKind::kConfig,
                fmt::format("bench tune: not even batch {} fits under {}: {}", allowed.front(),
                            FormatBytes(limit), ours.why),
                {}, "raise --memory-limit or make the model smaller");
  }
  stages.Begin("Lightning's finder (doubling, then binary search; no margin)");
  const auto t1 = std::chrono::steady_clock::now();
  const LightningResult lightning = LightningBatchFinder(probe, 2, allowed.back(), limit);
  const double lightning_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();

  const std::string name = o.batch_config.stem().string();
  BenchTable t;
  t.workload = "tune";
  t.rows.push_back({fmt::format("{}: batch chosen vs the largest that fits (Lightning, no margin)",
                                name),
                    double(ours.batch), "largest that fits", double(lightning.batch), "samples",
                    Better::kHigher});
  t.rows.push_back({fmt::format("{}: measured peak at the chosen batch vs (1 - margin) x limit",
                                name),
                    double(ours.peak_bytes) / double(1 << 20), "the margin's ceiling",
                    (1 - o.margin) * double(limit) / double(1 << 20), "MiB", Better::kLower});
  t.rows.push_back({fmt::format("{}: batch-size trials", name), double(ours.probes.size()),
                    "Lightning doubling + binary search", double(lightning.trials), "trials",
                    Better::kLower});
  t.rows.push_back({fmt::format("{}: search time", name), ours_s, "Lightning", lightning_s, "s",
                    Better::kLower});
  std::string probes;
  for (const MemoryProbe& m : ours.probes) {
    probes += fmt::format("{}{}: {}", probes.empty() ? "" : ", ", m.batch,
                          m.oom ? "out of memory" : FormatBytes(m.peak_bytes));
  }
  t.setup = fmt::format(
      "{} on {} ({}), byte tokens of the licence texts; limit {} = --memory-limit {} of the "
      "device's memory (CUDA: the caching allocator's fraction; its allocated peak is measured), "
      "margin {:.0f}%; each trial builds the trainer at that micro-batch and runs 2 steps. Our "
      "trials: {}. Lightning: from 2, doubling to the first out of memory, then halving the gap",
      o.batch_config.string(), o.device, fmt::join(o.sets, " "), FormatBytes(limit),
      o.memory_limit, 100 * o.margin, probes);
  return t;
}

}  // namespace

BenchTable RunTuneBench(const TuneBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path shop = o.scratch / "bench-tune-shop", text = o.scratch / "bench-tune-text";
  for (const auto& p : {shop, text}) fs::remove_all(p);
  if (!o.batch_config.empty()) {
    BenchTable t = BatchAtTheRealLimit(o, text);
    fs::remove_all(text);
    return t;
  }
  BenchStages stages("tune", 9);
  stages.Begin(fmt::format("data: gen shop {} queries, the licence-text corpus", o.queries));
  WriteShopShards(shop, ShopOptions{.queries = o.queries, .seed = 1});
  WriteByteTokens(text);
  // The defaults: pipeline.threads, prefetch and train.torch_threads as the
  // schema has them (what a user gets without setting them).
  const fs::path ranker = o.scratch / "bench-tune-ranker.yaml",
                 gpt = o.scratch / "bench-tune-gpt.yaml";
  WriteFileAtomic(ranker, fmt::format(R"yaml(
data: {{train: "{}"}}
pipeline: {{batch_size: 64, shuffle: global, dense: {}, sparse: {}}}
model: {{embedding_dim: 16, bottom: [64], top: [128, 64], loss: softmax}}
optim: {{lr: 0.003, sparse: lazy_adam, sparse_lr: 0.003}}
)yaml",
                                      shop.string(), YamlList(ShopDenseChains()),
                                      YamlList(ShopSparseChains())));
  WriteFileAtomic(gpt, fmt::format(R"yaml(
data: {{train: "{}"}}
pipeline: {{batch_size: 8, shuffle: global}}
model:
  kind: gpt
  gpt: {{context: 128, layers: 4, d_model: 256, heads: 4}}
)yaml",
                                   (text / "data").string()));
  ApplyProcessPolicy(0);
  BenchTable table;
  table.workload = "tune";
  BenchWorkload("ranker", ranker, o, stages, table);
  BenchWorkload("gpt", gpt, o, stages, table);
  table.setup = fmt::format(
      "ranker: gen shop {} queries, batch 64 lists; gpt: 4 layers x 256, context 128, batch 8, "
      "byte tokens of the licence texts; windows of ~{} s, tuner budget {} s, {} rounds in "
      "turns; the grid is measured as the tuner measures (3 windows, up to 8 until 2% spread); "
      "defaults = the schema's pipeline.threads, prefetch and train.torch_threads (0: a thread "
      "per core). Batch: a memory limit placed at {}x the configured batch from two setup "
      "probes; Lightning = its binsearch finder from 2",
      o.queries, o.window_s, o.budget_s, o.rounds, o.wall);
  for (const auto& p : {shop, text}) fs::remove_all(p);
  return table;
}

}  // namespace topspin::cli

#else

namespace topspin::cli {
BenchTable RunTuneBench(const TuneBenchOptions&) {
  throw Error(ErrorKind::kUsage, "bench tune needs LibTorch", {},
              "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
}
}  // namespace topspin::cli

#endif
