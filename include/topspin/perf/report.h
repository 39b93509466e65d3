// `topspin report RUN_DIR`: one self-contained HTML page about a training
// run (docs/PROFILING.md).
//
// The page draws, from RUN_DIR/metrics.jsonl: the loss, the validation
// metrics, the throughput, the phases of each log window as stacked bars,
// and the loader's stage use; from RUN_DIR/profile.json the phase table,
// bound, evidence, advice and MFU (topspin/perf/profile.h); and the
// resolved RUN_DIR/config.yaml in a collapsed block. Plots are SVG drawn in
// C++: the page has no script, loads nothing and works offline. Every
// plot's <svg> carries data-plot="NAME" data-series="K" data-points="M"
// (the series and points it drew): loss, validation, throughput, phases,
// loader.
//
//   const RunReport report = LoadRunReport(run_dir);  // Error when metrics.jsonl is bad
//   WriteFileAtomic(run_dir / kReportFile, RenderReportHtml(report));
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/perf/profile.h"

namespace topspin {

inline constexpr const char* kMetricsFile = "metrics.jsonl";
inline constexpr const char* kReportFile = "report.html";

// One line of metrics.jsonl: {"step":N,"time":unix_seconds, name: value...}.
struct MetricsRecord {
  int64_t step = 0;
  double time = NAN;  // Unix seconds; NaN when missing or not a number
  // Numbers by name. The strings "nan", "inf" and "-inf" (JsonlWriter's
  // spelling of non-finite values) become those values; other non-numbers
  // are left out.
  std::map<std::string, double> values;
};

// metrics.jsonl read back. Training records (loss, lr, docs_per_s,
// phase_ms/<phase>, loader_busy/<stage>) and evaluation records
// (valid/<metric>) share step numbers, so they are kept apart; within each,
// a step logged twice (a resumed run appends) keeps its later record.
struct MetricsLog {
  std::vector<MetricsRecord> train;   // by step, ascending
  std::vector<MetricsRecord> eval;    // by step, ascending; records with a "valid/" value
  int64_t replaced = 0;               // earlier records a later one for the same step replaced
  std::vector<std::string> warnings;  // "FILE:LINE: ..." for each torn line skipped
};

// The steady state of a run: its log windows (metrics.jsonl training
// records, with phase_ms/* and loader_busy/*) after the first `warmup_steps`
// steps, each analysed as a profile of its own (counts and peaks from
// `whole`), and all of them together.
struct SteadyState {
  StepProfile profile;  // the windows summed
  ProfileReport report;  // Analyze(profile)
  int windows = 0;       // windows after the warm-up
  int agree = 0;         // of them, how many name report.bound
};
// nullopt when no window ends after the warm-up.
std::optional<SteadyState> AnalyzeSteadyState(const StepProfile& whole,
                                              const std::vector<MetricsRecord>& windows,
                                              int64_t warmup_steps);

// Parses the text of metrics.jsonl (`file` names it in messages). A line cut
// short by a killed run is skipped with a warning: the last line, or one a
// resumed run later appended after. Any other malformed line, or a record
// without an integer "step", is Error{kData} naming file and line.
MetricsLog ParseMetricsLog(std::string_view text, const std::string& file);
// ParseMetricsLog of a file; Error{kIo} when it cannot be read.
MetricsLog ReadMetricsLog(const std::filesystem::path& path);

// Everything the page shows, read from a run directory.
struct RunReport {
  std::string run_name;  // the run directory's name
  std::filesystem::path run_dir;
  MetricsLog metrics;
  std::optional<StepProfile> profile;      // profile.json; empty: see profile_note
  std::string profile_note;                // why there is no profile section
  std::optional<std::string> config_yaml;  // config.yaml verbatim; empty when missing
  // Steps of the complete checkpoints in RUN_DIR/checkpoints (step-N/ with
  // its manifest.json), ascending: the ones still on disk.
  std::vector<int64_t> checkpoints;
  // The best of them: RUN_DIR/best.json's (train.best) when it names one of
  // them, else BestCheckpoint() by best_metric; -1 when none.
  int64_t best = -1;
  std::string best_metric = "valid/ndcg@10";  // best.json's metric, or NDCG@10
  bool best_max = true;
  // Things the reader should know (torn lines, a missing or unreadable
  // profile.json or config.yaml); the page lists them and the CLI logs them.
  std::vector<std::string> warnings;
};

// Of `checkpoints`, the one whose step has the best `metric` evaluation
// (highest with `max`, else lowest); -1 when none was evaluated.
int64_t BestCheckpoint(const std::vector<int64_t>& checkpoints, const MetricsLog& metrics,
                       const std::string& metric = "valid/ndcg@10", bool max = true);

// Reads metrics.jsonl (required: Error{kUsage} saying how to make one when
// missing), profile.json and config.yaml (optional: a warning each when
// missing or unreadable) from `run_dir`, and lists its checkpoints.
RunReport LoadRunReport(const std::filesystem::path& run_dir);

// The page: one HTML document, no script, no external resources.
std::string RenderReportHtml(const RunReport& report);

}  // namespace topspin
