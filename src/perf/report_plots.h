// The plots and summary of `topspin report` (internal to perf; the page is
// topspin/perf/report.h, the drawing svg_chart.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "perf/svg_chart.h"
#include "topspin/perf/report.h"

namespace topspin::perf_internal {

struct ReportPlot {
  Chart chart;          // the data drawn
  std::string svg;      // RenderLineChart or RenderStackedBars of it
  std::string caption;  // what the plot shows, in a sentence
};

// loss, one validation-<metric> per metric ("validation" when there is
// none), throughput, phases (stacked bars), loader: in that order, each
// drawn even when it has no data (then it says why).
std::vector<ReportPlot> ReportPlots(const MetricsLog& metrics);

// A phase's colour, the same in the bars and the profile table.
std::string PhaseColor(const std::string& phase);

// "RUN_DIR · steps 10-2000 · 2026-11-29 15:30:00 UTC to 16:02:11 (32m 11s)"
std::string RunSpan(const std::filesystem::path& run_dir, const MetricsLog& metrics);

// The headline numbers as HTML cards: last step, loss, best NDCG@10,
// throughput, bound, MFU.
std::string SummaryCards(const RunReport& report);

}  // namespace topspin::perf_internal
