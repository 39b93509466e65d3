#include "perf/report_plots.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace topspin::perf_internal {
namespace {

// Tableau 10: distinct hues that stay apart for most colour-blind readers.
const std::vector<std::string>& Palette() {
  static const std::vector<std::string> colors = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                  "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                  "#9c755f", "#bab0ac"};
  return colors;
}

std::string ColorFrom(const std::map<std::string, std::string>& known, const std::string& name,
                      size_t index) {
  const auto it = known.find(name);
  return it != known.end() ? it->second : Palette()[index % Palette().size()];
}

std::string StageColor(const std::string& stage, size_t index) {
  static const std::map<std::string, std::string> colors = {{"read", "#4e79a7"},
                                                            {"decode", "#f28e2b"},
                                                            {"transform", "#59a14f"},
                                                            {"assemble", "#b07aa1"}};
  return ColorFrom(colors, stage, index);
}

double Value(const MetricsRecord& r, const std::string& key) {
  const auto it = r.values.find(key);
  return it == r.values.end() ? NAN : it->second;
}

ChartSeries SeriesOf(const std::vector<MetricsRecord>& records, const std::string& key,
                     std::string name, std::string color) {
  ChartSeries s{std::move(name), std::move(color), {}, {}};
  for (const auto& r : records) {
    s.x.push_back(double(r.step));
    s.y.push_back(Value(r, key));
  }
  return s;
}

// The names after `prefix` any record has: those in `known` first, in its
// order, then the rest sorted.
std::vector<std::string> NamesWithPrefix(const std::vector<MetricsRecord>& records,
                                         const std::string& prefix,
                                         const std::vector<std::string>& known) {
  std::vector<std::string> found;
  for (const auto& r : records) {
    for (const auto& [key, value] : r.values) {
      if (!key.starts_with(prefix)) continue;
      const std::string name = key.substr(prefix.size());
      if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(name);
    }
  }
  const auto rank = [&](const std::string& name) {
    return std::find(known.begin(), known.end(), name) - known.begin();
  };
  std::sort(found.begin(), found.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  return found;
}

ReportPlot Lines(Chart chart, std::string caption) {
  std::string svg = RenderLineChart(chart);
  return {std::move(chart), std::move(svg), std::move(caption)};
}

// Where each resumed run took over: its first record says "resumed_from".
std::vector<ChartMarker> ResumeMarkers(const MetricsLog& m) {
  std::vector<ChartMarker> out;
  for (const auto& r : m.train) {
    const double from = Value(r, "resumed_from");
    if (std::isfinite(from)) out.push_back({from, fmt::format("resumed at {:.0f}", from)});
  }
  return out;
}

ReportPlot LossPlot(const MetricsLog& m) {
  Chart c{.name = "loss", .title = "Training loss", .x_label = "step", .y_label = "loss"};
  c.empty_note = "no \"loss\" in any training record";
  c.series.push_back(SeriesOf(m.train, "loss", "loss", Palette()[0]));
  c.markers = ResumeMarkers(m);
  return Lines(std::move(c),
               "The training loss, averaged over each log window (train.log_every); dashed lines "
               "mark resumes.");
}

// One chart per metric, each on its own scale: NDCG@1 at 0.84 and MRR at
// 0.99 on one axis would flatten both.
std::vector<ReportPlot> ValidationPlots(const MetricsLog& m) {
  const auto names =
      NamesWithPrefix(m.eval, "valid/", {"ndcg@10", "ndcg@1", "ndcg@3", "ndcg@5", "map@10", "mrr"});
  std::vector<ReportPlot> out;
  if (names.empty()) {
    Chart c{.name = "validation", .title = "Validation", .x_label = "step", .y_label = "score"};
    c.empty_note = "no evaluation records: data.valid is empty, or no evaluation has run yet";
    out.push_back(Lines(std::move(c), "Ranking metrics on data.valid (train.eval_every)."));
    return out;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    Chart c{.name = "validation-" + names[i],
            .title = "Validation " + names[i],
            .x_label = "step",
            .y_label = names[i]};
    c.series.push_back(SeriesOf(m.eval, "valid/" + names[i], names[i], Palette()[(i + 1) % 10]));
    c.markers = ResumeMarkers(m);
    out.push_back(Lines(std::move(c), fmt::format("{} on data.valid at each evaluation "
                                                  "(train.eval_every), on its own scale.",
                                                  names[i])));
  }
  return out;
}

// What the run's training records count per second: docs (the ranker) or
// tokens (the GPT); "docs" when no record says.
std::string ThroughputUnit(const MetricsLog& m) {
  for (const auto& r : m.train) {
    if (r.values.contains("tokens_per_s")) return "tokens";
    if (r.values.contains("docs_per_s")) return "docs";
  }
  return "docs";
}

ReportPlot ThroughputPlot(const MetricsLog& m) {
  const std::string unit = ThroughputUnit(m), key = unit + "_per_s", per_s = unit + "/s";
  Chart c{.name = "throughput",
          .title = "Throughput",
          .x_label = "step",
          .y_label = per_s,
          .unit = per_s,
          .y_from_zero = true};
  c.empty_note = fmt::format("no \"{}\" in any training record", key);
  c.series.push_back(SeriesOf(m.train, key, per_s, Palette()[4]));
  c.markers = ResumeMarkers(m);
  return Lines(std::move(c),
               fmt::format("{} trained per second in each log window, evaluation and checkpoint "
                           "time left out.",
                           unit == "tokens" ? "Tokens" : "Documents"));
}

ReportPlot PhasePlot(const MetricsLog& m) {
  Chart c{.name = "phases",
          .title = "Step phases per log window",
          .x_label = "step",
          .y_label = "ms per step",
          .unit = "ms/step",
          .y_from_zero = true};
  c.empty_note = "no phase_ms/* values: this run's trainer did not log per-window phases";
  // One bar per record that has phases (records from older trainers have none).
  std::vector<MetricsRecord> records;
  for (const auto& r : m.train) {
    const auto phase = r.values.lower_bound("phase_ms/");
    if (phase != r.values.end() && phase->first.starts_with("phase_ms/")) records.push_back(r);
  }
  const auto names = NamesWithPrefix(records, "phase_ms/", ProfilePhases());
  for (const auto& name : names) {
    c.series.push_back(SeriesOf(records, "phase_ms/" + name, name, PhaseColor(name)));
  }
  std::string svg = RenderStackedBars(c);
  return {std::move(c), std::move(svg),
          "Milliseconds per step in each phase, averaged over each log window: one bar per log "
          "record. data_wait is time blocked on the input pipeline; other is time no phase "
          "claims."};
}

ReportPlot LoaderPlot(const MetricsLog& m) {
  Chart c{.name = "loader",
          .title = "Loader stage utilisation",
          .x_label = "step",
          .y_label = "share of loader threads",
          .y_format = AxisFormat::kPercent,
          .y_from_zero = true};
  c.empty_note = "no loader_busy/* values: this run's trainer did not log loader stages";
  const auto names =
      NamesWithPrefix(m.train, "loader_busy/", {"read", "decode", "transform", "assemble"});
  for (size_t i = 0; i < names.size(); ++i) {
    c.series.push_back(
        SeriesOf(m.train, "loader_busy/" + names[i], names[i], StageColor(names[i], i)));
  }
  return Lines(std::move(c),
               "The share of the loader threads' time each stage kept busy in each log window "
               "(100% = every thread, all the time). A busy stage with a high data_wait is the "
               "bottleneck.");
}

std::string Utc(double unix_s, const char* format) {
  const time_t t = time_t(unix_s);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char text[64];
  return strftime(text, sizeof text, format, &tm) > 0 ? text : "";
}

std::string Duration(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  const auto whole = int64_t(s);
  if (s < 3600) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}h {:02}m", whole / 3600, whole / 60 % 60);
}

std::string Card(const std::string& label, const std::string& value, const std::string& sub) {
  return fmt::format(
      "<div class=\"card\"><div class=\"label\">{}</div><div class=\"value\">{}</div>"
      "<div class=\"sub\">{}</div></div>\n",
      HtmlEscape(label), HtmlEscape(value), HtmlEscape(sub));
}

// The last finite value of `key`, and its record.
const MetricsRecord* Last(const std::vector<MetricsRecord>& records, const std::string& key) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (std::isfinite(Value(*it, key))) return &*it;
  }
  return nullptr;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  const auto middle = v.begin() + std::ptrdiff_t(v.size() / 2);
  std::nth_element(v.begin(), middle, v.end());
  return *middle;
}

std::string TrainingCards(const MetricsLog& m) {
  std::string out;
  const int64_t last_step =
      std::max(m.train.empty() ? 0 : m.train.back().step, m.eval.empty() ? 0 : m.eval.back().step);
  out += Card("last step", fmt::format("{}", last_step),
              fmt::format("{} log records, {} evaluations", m.train.size(), m.eval.size()));
  const MetricsRecord* loss = Last(m.train, "loss");
  out += loss ? Card("loss", FormatValue(Value(*loss, "loss"), AxisFormat::kNumber),
                     fmt::format("at step {}", loss->step))
              : Card("loss", "-", "no loss logged");
  const MetricsRecord* best = nullptr;
  for (const auto& r : m.eval) {
    const double v = Value(r, "valid/ndcg@10");
    if (std::isfinite(v) && (best == nullptr || v > Value(*best, "valid/ndcg@10"))) best = &r;
  }
  out += best ? Card("best valid ndcg@10", fmt::format("{:.4f}", Value(*best, "valid/ndcg@10")),
                     fmt::format("at step {}", best->step))
              : Card("best valid ndcg@10", "-", "no evaluation");
  const std::string unit = ThroughputUnit(m), key = unit + "_per_s";
  std::vector<double> rates;
  for (const auto& r : m.train) {
    if (std::isfinite(Value(r, key))) rates.push_back(Value(r, key));
  }
  out += rates.empty() ? Card("throughput", "-", "no " + key + " logged")
                       : Card("throughput", fmt::format("{:.0f}", Median(rates)),
                              unit + "/s, the median of the log windows");
  if (const MetricsRecord* skipped = Last(m.train, "skipped_steps")) {
    out += Card("skipped steps", fmt::format("{:.0f}", Value(*skipped, "skipped_steps")),
                "non-finite gradients, update skipped");
  }
  return out;
}

std::string ProfileCards(const RunReport& r) {
  if (!r.profile) return Card("bound", "-", "no profile.json");
  const ProfileReport p = Analyze(*r.profile);
  return Card("bound", p.bound, "profile.json, whole run") +
         (std::isnan(p.mfu) ? Card("MFU", "unknown", "no peak measured")
                            : Card("MFU", fmt::format("{:.1f}%", 100 * p.mfu),
                                   fmt::format("of {:.3f} TFLOP/s", r.profile->peak_flops / 1e12)));
}

}  // namespace

std::vector<ReportPlot> ReportPlots(const MetricsLog& metrics) {
  std::vector<ReportPlot> plots;
  plots.push_back(LossPlot(metrics));
  for (auto& plot : ValidationPlots(metrics)) plots.push_back(std::move(plot));
  plots.push_back(ThroughputPlot(metrics));
  plots.push_back(PhasePlot(metrics));
  plots.push_back(LoaderPlot(metrics));
  return plots;
}

std::string PhaseColor(const std::string& phase) {
  // data_wait in red: a stalled pipeline should stand out.
  static const std::map<std::string, std::string> colors = {
      {"data_wait", "#e15759"}, {"h2d", "#ff9da7"},        {"forward", "#4e79a7"},
      {"backward", "#59a14f"},
      {"sync", "#b07aa1"},      {"optimizer", "#f28e2b"},  {"log", "#edc948"},
      {"eval", "#76b7b2"},      {"checkpoint", "#9c755f"}, {"other", "#bab0ac"}};
  const auto& order = ProfilePhases();
  return ColorFrom(colors, phase, std::find(order.begin(), order.end(), phase) - order.begin());
}

std::string RunSpan(const std::filesystem::path& run_dir, const MetricsLog& m) {
  std::string out = run_dir.string();
  if (!m.train.empty()) {
    out += fmt::format(" · steps {} to {}", m.train.front().step, m.train.back().step);
  }
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto* records : {&m.train, &m.eval}) {
    for (const auto& r : *records) {
      if (!std::isfinite(r.time)) continue;
      first = std::min(first, r.time);
      last = std::max(last, r.time);
    }
  }
  if (first <= last) {
    out += fmt::format(" · {} UTC to {} ({})", Utc(first, "%Y-%m-%d %H:%M:%S"),
                       Utc(last, last - first < 86400 ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S"),
                       Duration(last - first));
  }
  if (m.replaced > 0) {
    out += fmt::format(" · resumed: {} record{} replaced by later ones for the same step",
                       m.replaced, m.replaced == 1 ? "" : "s");
  }
  return out;
}

std::string SummaryCards(const RunReport& report) {
  return "<div class=\"cards\">\n" + TrainingCards(report.metrics) + ProfileCards(report) +
         "</div>\n";
}

}  // namespace topspin::perf_internal
