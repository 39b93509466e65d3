// `topspin report`: reading a run directory and assembling the page
// (topspin/perf/report.h). The plots are in report_plots.cc, the drawing
// in svg_chart.cc.
#include "topspin/perf/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perf/report_plots.h"
#include "perf/svg_chart.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using perf_internal::HtmlEscape;

// The page's only styling; no fonts or sheets are fetched.
constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
body { margin: 0; background: #f6f8fa; color: #1f2328;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 28px 0 10px; }
.meta, .caption, .note { color: #57606a; }
.caption { font-size: 12.5px; margin: 4px 0 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr));
  gap: 12px; margin: 20px 0 8px; }
.card, .panel { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; }
.card { padding: 10px 14px; }
.card .label { color: #57606a; font-size: 11.5px; text-transform: uppercase;
  letter-spacing: .04em; }
.card .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .sub { color: #57606a; font-size: 12px; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr));
  gap: 16px; }
.panel { padding: 12px 16px; }
svg.plot { display: block; height: auto; }
.warnings { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 8px;
  padding: 8px 16px; margin: 16px 0; }
.warnings ul { margin: 4px 0; padding-left: 20px; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 5px 10px; border-bottom: 1px solid #eaeef2; text-align: left;
  vertical-align: top; }
th { color: #57606a; font-weight: 600; font-size: 12.5px; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.total td { font-weight: 600; border-top: 1px solid #d0d7de; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 6px; }
.bar { height: 10px; border-radius: 2px; min-width: 1px; }
td.barcell { width: 40%; }
.profile { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(520px, 100%), 1fr));
  gap: 16px; }
.profile th[scope=row] { width: 9em; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 12px; background: #ddf4ff;
  color: #0550ae; font-weight: 600; }
details summary { cursor: pointer; font-weight: 600; }
pre { overflow: auto; background: #f6f8fa; border-radius: 6px; padding: 12px; margin: 10px 0 0;
  font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
footer { color: #57606a; font-size: 12px; margin: 32px 0 8px; }
)css";

std::string Warnings(const RunReport& r) {
  if (r.warnings.empty()) return "";
  std::string out = "<div class=\"warnings\"><strong>Notes</strong><ul>\n";
  for (const auto& w : r.warnings) out += fmt::format("<li>{}</li>\n", HtmlEscape(w));
  return out + "</ul></div>\n";
}

std::string Plots(const RunReport& r) {
  std::string out = "<h2>Training</h2>\n<div class=\"plots\">\n";
  for (const auto& plot : perf_internal::ReportPlots(r.metrics)) {
    out += fmt::format(
        "<section class=\"panel\" id=\"{}\">\n{}<p class=\"caption\">{}</p>\n</section>\n",
        HtmlEscape(plot.chart.name), plot.svg, HtmlEscape(plot.caption));
  }
  return out + "</div>\n";
}

std::string PhaseTable(const ProfileReport& report) {
  std::string out =
      "<table><thead><tr><th>phase</th><th class=\"num\">ms/step</th><th "
      "class=\"num\">share</th><th></th></tr></thead><tbody>\n";
  for (const auto& row : report.rows) {
    const std::string color = perf_internal::PhaseColor(row.phase);
    out += fmt::format(
        "<tr><td><span class=\"swatch\" style=\"background:{0}\"></span>{1}</td>"
        "<td class=\"num\">{2:.3f}</td><td class=\"num\">{3:.1f}%</td><td class=\"barcell\">"
        "<div class=\"bar\" style=\"width:{4:.1f}%;background:{0}\"></div></td></tr>\n",
        color, HtmlEscape(row.phase), row.ms_per_step, 100 * row.share,
        std::clamp(100 * row.share, 0.0, 100.0));
  }
  out += fmt::format(
      "<tr class=\"total\"><td>step</td><td class=\"num\">{:.3f}</td><td "
      "class=\"num\">100.0%</td><td></td></tr>\n</tbody></table>\n",
      report.step_ms);
  return out;
}

std::string Row(std::string_view name, const std::string& html) {
  return fmt::format("<tr><th scope=\"row\">{}</th><td>{}</td></tr>\n", HtmlEscape(name), html);
}

std::string ProfileFacts(const StepProfile& p, const ProfileReport& r) {
  std::string out = "<table><tbody>\n";
  out += Row("bound", fmt::format("<span class=\"badge\">{}</span>", HtmlEscape(r.bound)));
  out += Row("evidence", HtmlEscape(r.evidence));
  out += Row("try", HtmlEscape(r.advice));
  out += Row("MFU", std::isnan(r.mfu)
                        ? std::string("unknown: no peak was measured (<code>topspin profile "
                                      "RUN_DIR --peak TFLOPS</code> gives one)")
                        : HtmlEscape(fmt::format("{:.1f}% of {:.3f} TFLOP/s ({})", 100 * r.mfu,
                                                 p.peak_flops / 1e12, p.peak_source)));
  out += Row("model", HtmlEscape(fmt::format("{:.3f} TFLOP/s per rank", r.tflops)));
  out += Row("throughput", HtmlEscape(fmt::format("{:.0f} {}/s", r.items_per_s, p.unit)));
  out += Row("data stall", HtmlEscape(fmt::format("{:.1f}% of the step", 100 * r.data_stall)));
  out += Row(
      "memory",
      HtmlEscape(fmt::format(
          "~{:.2f} GB/s (an estimate from the shapes: embedding rows and optimizer "
          "state){}",
          r.memory_gbs,
          std::isnan(r.memory_use) ? ""
                                   : fmt::format(", {:.1f}% of {:.1f} GB/s measured",
                                                 100 * r.memory_use, p.peak_bytes_per_s / 1e9))));
  out += Row("steps", HtmlEscape(fmt::format("{} on {} rank{}, {} loader thread{}", p.steps,
                                             p.world_size, p.world_size == 1 ? "" : "s",
                                             p.loader_threads, p.loader_threads == 1 ? "" : "s")));
  return out + "</tbody></table>\n";
}

std::string ProfileSection(const RunReport& r) {
  std::string out = "<h2>Profile</h2>\n";
  if (!r.profile) {
    return out + fmt::format("<div class=\"panel\"><p class=\"note\">{}</p></div>\n",
                             HtmlEscape(r.profile_note));
  }
  const ProfileReport report = Analyze(*r.profile);
  out += "<div class=\"profile\">\n<section class=\"panel\" id=\"profile-phases\">\n";
  out += "<p class=\"caption\">Where a step's time went over the whole run (profile.json).</p>\n";
  out += PhaseTable(report) + "</section>\n";
  out += "<section class=\"panel\" id=\"profile-summary\">\n" + ProfileFacts(*r.profile, report);
  return out + "</section>\n</div>\n";
}

std::string CheckpointSection(const RunReport& r) {
  std::string out = "<h2>Checkpoints</h2>\n<div class=\"panel\" id=\"checkpoints\">\n";
  if (r.checkpoints.empty()) {
    return out + "<p class=\"note\">No complete checkpoint in checkpoints/.</p></div>\n";
  }
  std::map<int64_t, double> ndcg;
  for (const auto& e : r.metrics.eval) {
    const auto it = e.values.find(r.best_metric);
    if (it != e.values.end()) ndcg[e.step] = it->second;
  }
  const int64_t best = r.best;
  std::string metric = r.best_metric;
  std::replace(metric.begin(), metric.end(), '/', ' ');
  out += fmt::format(
      "<table><thead><tr><th>checkpoint</th><th class=\"num\">{}</th><th></th></tr></thead>"
      "<tbody>\n",
      HtmlEscape(metric));
  for (auto it = r.checkpoints.rbegin(); it != r.checkpoints.rend(); ++it) {
    const int64_t step = *it;
    std::vector<std::string> notes;
    if (step == best) notes.push_back("best");
    if (step == r.checkpoints.back()) notes.push_back("newest");
    const auto v = ndcg.find(step);
    out += fmt::format(
        "<tr data-step=\"{0}\"{1}><td>checkpoints/step-{0}</td><td class=\"num\">{2}</td>"
        "<td>{3}</td></tr>\n",
        step, step == best ? " class=\"best\"" : "",
        v == ndcg.end() ? "-" : fmt::format("{:.4f}", v->second), Join(notes, ", "));
  }
  out += "</tbody></table>\n<p class=\"caption\">The checkpoints still on disk "
         "(train.keep_checkpoints prunes older ones; the best is kept), with the evaluation of "
         "their step. <code>topspin eval</code> and <code>topspin score</code> use the best "
         "unless <code>--checkpoint latest</code>, and take any of them by path.</p>\n";
  return out + "</div>\n";
}

std::string ConfigSection(const RunReport& r) {
  std::string out = "<h2>Config</h2>\n<div class=\"panel\">\n";
  if (!r.config_yaml) {
    return out + "<p class=\"note\">No config.yaml in this run directory.</p></div>\n";
  }
  const auto lines = std::count(r.config_yaml->begin(), r.config_yaml->end(), '\n');
  out += fmt::format(
      "<details id=\"config\"><summary>config.yaml, as resolved for this run ({} lines)</summary>\n"
      "<pre>{}</pre></details>\n",
      lines, HtmlEscape(*r.config_yaml));
  return out + "</div>\n";
}

}  // namespace

int64_t BestCheckpoint(const std::vector<int64_t>& checkpoints, const MetricsLog& metrics,
                       const std::string& metric, bool max) {
  int64_t best = -1;
  double best_value = NAN;
  for (const auto& e : metrics.eval) {
    const auto it = e.values.find(metric);
    if (it == e.values.end() || !std::isfinite(it->second)) continue;
    if (!std::binary_search(checkpoints.begin(), checkpoints.end(), e.step)) continue;
    if (best < 0 || (max ? it->second > best_value : it->second < best_value)) {
      best_value = it->second;
      best = e.step;
    }
  }
  return best;
}

RunReport LoadRunReport(const fs::path& run_dir) {
  if (!fs::is_directory(run_dir)) {
    throw Error(ErrorKind::kUsage, "not a directory", {.file = run_dir.string()},
                "pass the run directory a training run wrote, e.g. runs/ranker-shop-001");
  }
  RunReport r;
  r.run_dir = run_dir;
  r.run_name = fs::weakly_canonical(fs::absolute(run_dir)).filename().string();
  const fs::path metrics = run_dir / kMetricsFile;
  if (!fs::exists(metrics)) {
    throw Error(
        ErrorKind::kUsage,
        fmt::format("no {} in {}: is this a run directory?", kMetricsFile, run_dir.string()), {},
        "train with `topspin train CONFIG` first, then pass the run directory it prints");
  }
  r.metrics = ReadMetricsLog(metrics);
  r.warnings = r.metrics.warnings;
  const fs::path profile = run_dir / kProfileFile;
  if (!fs::exists(profile)) {
    r.profile_note = fmt::format(
        "No {} in this run directory: training writes it when the run ends, so a run that was "
        "killed, or is still going, has none. `topspin profile CONFIG` measures one.",
        kProfileFile);
    r.warnings.push_back(fmt::format("no {}: the profile section is left out", kProfileFile));
  } else {
    try {
      r.profile = ReadProfile(profile);
    } catch (const Error& e) {
      r.profile_note = "The profile could not be read: " + e.Message();
      r.warnings.push_back(e.Message());
    }
  }
  if (fs::is_directory(run_dir / "checkpoints")) {
    for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints")) {
      const std::string name = entry.path().filename().string();
      int64_t step = -1;
      const char* digits = name.data() + std::min<size_t>(5, name.size());
      const auto [end, ec] = std::from_chars(digits, name.data() + name.size(), step);
      if (name.starts_with("step-") && ec == std::errc() && end == name.data() + name.size() &&
          fs::exists(entry.path() / "manifest.json")) {
        r.checkpoints.push_back(step);
      }
    }
    std::sort(r.checkpoints.begin(), r.checkpoints.end());
  }
  // train.best's choice, when the run made one.
  int64_t named = -1;
  if (fs::exists(run_dir / "best.json")) {
    try {
      const auto best = nlohmann::json::parse(ReadFile(run_dir / "best.json"));
      named = best.at("step").get<int64_t>();
      r.best_metric = best.at("metric").get<std::string>();
      r.best_max = best.at("mode").get<std::string>() == "max";
    } catch (const std::exception& e) {
      r.warnings.push_back(fmt::format("cannot read best.json: {}", e.what()));
    }
  }
  r.best = std::binary_search(r.checkpoints.begin(), r.checkpoints.end(), named)
               ? named
               : BestCheckpoint(r.checkpoints, r.metrics, r.best_metric, r.best_max);
  const fs::path config = run_dir / "config.yaml";
  if (fs::exists(config)) {
    r.config_yaml = ReadFile(config);
  } else {
    r.warnings.push_back("no config.yaml: the config section is left out");
  }
  return r;
}

std::string RenderReportHtml(const RunReport& r) {
  const std::string title = "topspin report: " + r.run_name;
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // An empty icon: browsers would otherwise ask the file system for one.
      "<link rel=\"icon\" href=\"data:,\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
      HtmlEscape(title), kStyle);
  out += fmt::format("<h1>{}</h1>\n<div class=\"meta\">{}</div>\n", HtmlEscape(title),
                     HtmlEscape(perf_internal::RunSpan(r.run_dir, r.metrics)));
  out += Warnings(r);
  out += perf_internal::SummaryCards(r);
  out += Plots(r);
  out += ProfileSection(r);
  out += CheckpointSection(r);
  out += ConfigSection(r);
  out += fmt::format(
      "<footer>Written by <code>topspin report</code> (topspin {}, {}): one file, no scripts, "
      "nothing loaded from elsewhere. Hover a point or a bar for its value.</footer>\n",
      build::kVersion, HtmlEscape(build::kGitCommit));
  return out + "</main>\n</body>\n</html>\n";
}

}  // namespace topspin
