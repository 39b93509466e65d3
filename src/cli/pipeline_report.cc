#include "cli/pipeline_report.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topspin/core/files.h"
#include "topspin/core/progress.h"
#include "topspin/perf/memory.h"
#include "topspin/perf/trace.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/pipeline/pipeline_config.h"

namespace topspin::cli {
namespace {

void ShowFirstList(const Pipeline& p, const Batch& b) {
  if (b.num_lists == 0) return;
  const auto offsets = b.offsets();
  const size_t f = b.layout().dense_dim, c = b.layout().sparse_dim;
  fmt::print("first list    {} products, labels [{}]\n", offsets[1],
             fmt::join(b.labels().subspan(0, static_cast<size_t>(offsets[1])), ", "));
  const size_t shown = std::min<size_t>(f, 6);
  std::string dense;
  for (size_t j = 0; j < shown; ++j) {
    dense += fmt::format("{}{}={:.3f}", j ? ", " : "", p.dense_names()[j], b.dense()[j]);
  }
  std::string sparse;
  for (size_t j = 0; j < c; ++j) {
    sparse += fmt::format("{}{}={}", j ? ", " : "", p.sparse_names()[j], b.sparse()[j]);
  }
  fmt::print("  product 0   {}{}\n", dense, f > shown ? fmt::format(", ... ({} dense)", f) : "");
  if (c > 0) fmt::print("              {}\n", sparse);
}

}  // namespace

nlohmann::json RunPipelineReport(const Config& config, const PipelineReportOptions& o) {
  const Settings settings = Settings::From(config);
  PipelineOptions options = PipelineOptionsFrom(settings);
  options.max_epochs = o.epochs;
  const RankingSpec spec = RankingSpecFrom(settings, o.dataset_key);
  TraceRecorder trace;
  if (!o.trace.empty()) options.trace = &trace;
  const auto start = std::chrono::steady_clock::now();
  Pipeline p(spec, options);
  const BatchLayout& layout = p.layout();
  fmt::print("pipeline      {} lists per epoch -> {} batches of {} ({} threads, prefetch {}, {})\n",
             p.samples_per_epoch(), p.batches_per_epoch(), options.batch_size, options.threads,
             options.prefetch, ShuffleModeName(options.shuffle));
  fmt::print("features      {} dense, {} sparse: {}{}\n", layout.dense_dim, layout.sparse_dim,
             fmt::join(p.sparse_names(), ", "), layout.sparse_dim > 0 ? "" : "-");
  const uint64_t total = o.max_batches > 0
                             ? std::min(o.max_batches, o.epochs * p.batches_per_epoch())
                             : o.epochs * p.batches_per_epoch();
  ProgressOptions progress_options;
  progress_options.unit = "batches";
  progress_options.interval_s = settings.run.progress_interval_s;
  Progress progress("pipeline", total, progress_options);
  uint64_t batches = 0, docs = 0;
  while (batches < total) {
    BatchPtr b = p.Next();
    if (!b) break;
    if (batches == 0 && o.show_batch) ShowFirstList(p, *b);
    docs += b->num_docs;
    progress.Update(++batches);
  }
  progress.Complete();  // an epoch may end a batch short of the estimate
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const PipelineStats s = p.Stats();
  fmt::print(
      "throughput    {} batches, {} docs in {:.2f} s: {:.0f} docs/s; Next() waited "
      "{:.0f}% of the time (no model here: the consumer does nothing else)\n",
      batches, docs, seconds, docs / seconds, 100 * s.consumer_wait_s / seconds);
  nlohmann::json stages = nlohmann::json::object();
  std::string line;
  for (const auto& st : s.stages) {
    const double share = st.busy_s / (seconds * options.threads);
    line += fmt::format("{}{} {:.0f}%", line.empty() ? "" : ", ", st.name, 100 * share);
    stages[st.name] = {{"busy_s", st.busy_s}, {"items", st.items}, {"bytes", st.bytes}};
  }
  fmt::print("stages        busy share of {} threads: {}; ready queue {:.1f}/{} on average\n",
             options.threads, line, s.queue_mean_ready, s.queue_capacity);
  fmt::print(
      "memory        RSS {}, cache {} ({} row groups loaded, {} again for the same epoch, "
      "{} hits)\n",
      FormatBytes(CurrentRssBytes()), FormatBytes(s.cache_resident_bytes), s.cache_loads,
      s.cache_reloads, s.cache_hits);
  if (s.skipped_units > 0) fmt::print("skipped       {} damaged row groups\n", s.skipped_units);
  if (!o.trace.empty()) {
    trace.Write(o.trace);
    fmt::print("trace         {} ({} spans; open in ui.perfetto.dev)\n", o.trace, trace.size());
  }
  return {{"batches", batches},
          {"docs", docs},
          {"seconds", seconds},
          {"docs_per_s", docs / seconds},
          {"consumer_wait_s", s.consumer_wait_s},
          {"dense", p.dense_names()},
          {"sparse", p.sparse_names()},
          {"stages", stages},
          {"skipped_row_groups", s.skipped_units},
          {"row_group_loads", s.cache_loads},
          {"row_group_reloads", s.cache_reloads}};
}

}  // namespace topspin::cli
