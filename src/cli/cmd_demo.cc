// topspin demo: the main job on the embedded config (configs/demo.yaml).
//
// The demo runs every stage topspin has so far: config -> run directory ->
// launch environment -> synthetic product search data written as verified
// shards -> deterministic sample order of its query lists and rank slices
// -> one epoch of the input pipeline with the config's features -> the
// ranker trained on it and compared with text-match ordering on held-out
// queries, with a phase breakdown -> learning-rate schedule; it records
// what it computed in <run dir>/demo.json.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/pipeline_report.h"
#include "topspin/build_info.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/progress.h"
#include "topspin/core/run_dir.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/demo_config.h"
#include "topspin/dist/launch_env.h"
#include "topspin/pipeline/sample_order.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/model/rank_metrics.h"
#include "topspin/perf/profile.h"
#include "topspin/train/lr_schedule.h"
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

struct DemoArgs {
  std::vector<std::string> overrides;
  uint64_t queries = 5000;
};

// gen shop -> shards in the run directory, then a full verification.
nlohmann::json MakeData(const std::filesystem::path& dir, const Settings& settings,
                        uint64_t queries, uint64_t seed_offset = 0) {
  ShopOptions shop;
  shop.queries = queries;
  shop.seed = static_cast<uint64_t>(settings.run.seed) + seed_offset;
  DatasetWriterOptions writer;
  writer.threads = static_cast<int>(settings.pipeline.threads);
  writer.created_by = "topspin demo";
  ProgressOptions progress_options;
  progress_options.unit = "queries";
  progress_options.interval_s = settings.run.progress_interval_s;
  Progress progress("gen shop", queries, progress_options);
  const Manifest m =
      WriteShopShards(dir, shop, writer, [&](uint64_t done) { progress.Update(done); });
  progress.Complete();
  DatasetReader(dir).Verify();
  fmt::print(
      "dataset       {}: {} rows, {} query lists ({}-{} products), {} shard(s), {} -> {} "
      "(verified)\n",
      dir.string(), m.rows(), m.group_stats.groups, m.group_stats.min_length,
      m.group_stats.max_length, m.shards.size(), FormatBytes(m.raw_bytes()),
      FormatBytes(m.bytes()));
  return {{"dir", dir.string()},       {"rows", m.rows()},   {"groups", m.group_stats.groups},
          {"shards", m.shards.size()}, {"bytes", m.bytes()}, {"raw_bytes", m.raw_bytes()}};
}

// The first global batch of epoch 0 and the slice each rank takes of it, at
// world sizes 1 and 2: the same samples either way.
nlohmann::json ShowSampleOrder(const Settings& settings, uint64_t samples) {
  const PipelineConfig& p = settings.pipeline;
  SampleOrderOptions options;
  options.mode = ParseShuffleMode(p.shuffle, ErrorWhere{.field = "pipeline.shuffle"});
  options.seed = static_cast<uint64_t>(settings.run.seed);
  const SampleOrder order(samples, options);
  const auto batch = static_cast<uint64_t>(p.batch_size);
  fmt::print("sample order  {} query lists, shuffle={}, {} global batches of {} per epoch\n",
             samples, p.shuffle, BatchesPerEpoch(samples, batch, p.drop_last), batch);
  nlohmann::json out{{"samples", samples}, {"shuffle", p.shuffle}, {"batch_size", batch}};
  for (int world : {1, 2}) {
    for (int rank = 0; rank < world; ++rank) {
      const BatchSlice slice = RankSlice(batch, rank, world);
      std::vector<uint64_t> ids;
      for (uint64_t pos = slice.begin; pos < slice.end; ++pos) ids.push_back(order.At(0, pos));
      const size_t shown = std::min<size_t>(ids.size(), 8);
      fmt::print("  world {} rank {}: batch 0 = [{}{}]\n", world, rank,
                 fmt::join(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(shown), ", "),
                 ids.size() > shown ? ", ..." : "");
      out[fmt::format("world{}_rank{}", world, rank)] = ids;
    }
  }
  return out;
}

nlohmann::json ShowSchedule(const Settings& settings) {
#ifdef TOPSPIN_HAVE_TORCH
  const LrSchedule schedule(settings.optim, settings.train);
  const int64_t steps = schedule.total_steps();
  nlohmann::json out = nlohmann::json::object();
  std::string line;
  for (int64_t step : {int64_t{0}, schedule.warmup_steps() - 1, steps / 2, steps - 1}) {
    if (step < 0) continue;
    out[std::to_string(step)] = schedule.At(step);
    line += fmt::format("  step {}: {:.3g}", step, schedule.At(step));
  }
  fmt::print("lr schedule   {} over {} steps, warmup {}:{}\n", settings.optim.schedule,
             steps, schedule.warmup_steps(), line);
  return out;
#else
  fmt::print("lr schedule   (needs the LibTorch build)\n");
  return nullptr;
#endif
}

#ifdef TOPSPIN_HAVE_TORCH
// NDCG@10 of ordering each held-out list by title relevance alone: what a
// text-match-only ranker gets.
double TextMatchNdcg10(const std::filesystem::path& dir) {
  const DatasetReader ds(dir);
  RankMetricAccumulator acc({10});
  std::vector<float> scores, labels;
  int64_t current = -1;
  const auto flush = [&] {
    if (!scores.empty()) acc.AddList(scores, labels);
    scores.clear();
    labels.clear();
  };
  for (size_t s = 0; s < ds.num_shards(); ++s) {
    for (size_t g = 0; g < ds.shard(s).num_row_groups(); ++g) {
      const Table t = ds.shard(s).ReadRowGroup(g, {"qid", "label", "title_relevance"});
      for (size_t r = 0; r < t.rows(); ++r) {
        const int64_t qid = t.columns[0].Values<int64_t>()[r];
        if (qid != current) flush();
        current = qid;
        labels.push_back(static_cast<float>(t.columns[1].AsDouble(r)));
        const double rel = t.columns[2].AsDouble(r);
        scores.push_back(std::isnan(rel) ? 0.0f : static_cast<float>(rel));
      }
    }
  }
  flush();
  return acc.ndcg(10);
}

// Trains the ranker on the demo data and compares it with text match on
// held-out queries.
nlohmann::json TrainAndCompare(const Config& config, const std::filesystem::path& run_dir,
                               const std::filesystem::path& valid) {
  ApplyProcessPolicy(Settings::From(config).train.torch_threads);
  const RankerTrainResult r = TrainRanker(config, {.run_dir = run_dir});
  const double text = TextMatchNdcg10(valid);
  fmt::print("trained       {} steps, {:.0f} docs/s, last loss {:.4f}\n", r.step, r.items_per_s,
             r.last_loss);
  fmt::print("held out      NDCG@10 {:.4f} (ranker) vs {:.4f} (text match only): {:+.4f}\n",
             r.valid_ndcg10, text, r.valid_ndcg10 - text);
  fmt::print("phases        {}\n", DescribePhases(r));
  fmt::print("checkpoint    {}\n", r.checkpoint.string());
  // The profiler's verdict on the steps just run (profile.json).
  const ProfileReport profile = Analyze(r.profile);
  fmt::print("bound         {}: {}\n", profile.bound, profile.evidence);
  return {{"steps", r.step},          {"docs_per_s", r.items_per_s},
          {"ndcg10", r.valid_ndcg10}, {"text_match_ndcg10", text},
          {"phases_s", r.phase_s},    {"checkpoint", r.checkpoint.string()}};
}
#endif

void RunDemo(const DemoArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  const Config base = Config::Parse(build::kDemoConfig, "<embedded configs/demo.yaml>",
                                    args.overrides, TopspinSchema());
  const RunConfig base_run = RunConfig::From(base);
  SetLogLevel(base_run.log_level);
  const auto dir = CreateRunDirectory(base_run.dir, base_run.name, base);
  // The data lands in the run directory; the pipeline reads it from there.
  overrides.push_back("data.train=" + (dir / "data" / "shop").string());
  overrides.push_back("data.valid=" + (dir / "data" / "valid").string());
  const Config config =
      Config::Parse(build::kDemoConfig, "<embedded configs/demo.yaml>", overrides, TopspinSchema());
  const Settings settings = Settings::From(config);
  fmt::print("topspin demo  config hash {}\n", config.Hash());
  fmt::print("run directory {}\n", dir.string());
  const LaunchEnv env = DetectLaunchEnv();
  fmt::print("launch        {}\n", Describe(env));
  nlohmann::json record{
      {"version", build::kVersion}, {"config_hash", config.Hash()}, {"launch", Describe(env)}};
  record["data"] = MakeData(dir / "data" / "shop", settings, args.queries);
  record["sample_order"] = ShowSampleOrder(settings, record["data"]["groups"].get<uint64_t>());
  record["pipeline"] = RunPipelineReport(config, PipelineReportOptions{});
#ifdef TOPSPIN_HAVE_TORCH
  // Held-out queries: another seed, so no query of the training data.
  record["valid_data"] =
      MakeData(dir / "data" / "valid", settings, std::max<uint64_t>(args.queries / 4, 100), 2);
  record["train"] = TrainAndCompare(config, dir, dir / "data" / "valid");
#endif
  record["lr_schedule"] = ShowSchedule(settings);
  WriteFileAtomic(dir / "demo.json", record.dump(2) + "\n");
  fmt::print("wrote         {}\n", (dir / "demo.json").string());
  fmt::print("next          topspin report {0}   (an HTML report of the run)\n"
             "              topspin profile {0}   (where the step time went)\n"
             "              topspin train configs/ranker-shop.yaml --set data.train={1} --nproc 2"
             "   (data parallel)\n",
             dir.string(), (dir / "data" / "shop").string());
}

}  // namespace

void RegisterDemo(CLI::App& app) {
  static DemoArgs args;
  auto* demo =
      app.add_subcommand("demo", "Run the main job on the embedded config (configs/demo.yaml)");
  demo->add_option("--set", args.overrides, "override a key: --set run.dir=/tmp/runs (repeatable)");
  demo->add_option("--queries", args.queries, "queries of synthetic product-search data")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  RegisterDemoGpt(*demo);
  demo->callback([demo] {
    if (demo->got_subcommand("gpt")) return;  // `topspin demo gpt` ran its own job
    RunDemo(args);
  });
}

}  // namespace topspin::cli
