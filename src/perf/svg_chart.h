// SVG charts for `topspin report` (internal to perf; the page is
// topspin/perf/report.h). Drawn here in C++ rather than by a script in the
// page, so the page needs no JavaScript and has nothing that can fail in a
// browser; hovering a point or bar shows its value through SVG <title>.
//
// Every chart's root <svg> carries data-plot="NAME", data-series="K" and
// data-points="M": the series and the points it actually drew, so a test
// can tell a plot that holds data from an empty frame.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace topspin::perf_internal {

enum class AxisFormat {
  kNumber,   // 0.25, 12, 180k, 1.5M
  kPercent,  // values are shares: 0.25 -> 25%
};

struct ChartSeries {
  std::string name;
  std::string color;      // any CSS colour
  std::vector<double> x;  // same length as y
  std::vector<double> y;  // a non-finite value is a gap: neither drawn nor counted
};

// A vertical dashed line across a line chart at x, e.g. where a resumed
// run took over; `label` is its tooltip and caption.
struct ChartMarker {
  double x = 0;
  std::string label;
};

struct Chart {
  std::string name;  // data-plot attribute, e.g. "loss"
  std::string title;
  std::string x_label;
  std::string y_label;
  std::string unit;  // after values in tooltips, e.g. "ms/step"; none for percentages
  AxisFormat y_format = AxisFormat::kNumber;
  bool y_from_zero = false;  // keep 0 in the y range (throughput, shares)
  std::string empty_note;    // shown instead of a plot when no series has a point
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;  // line charts; those outside the x range are left out
};

// Lines over a numeric x. Series with few points (and isolated points
// between gaps) also get markers, each with its value as a tooltip. Each
// ChartMarker in range is a dashed line with class="marker".
std::string RenderLineChart(const Chart& chart);

// One bar per x value, evenly spaced, series stacked in order. Series
// must share x (the first series' x labels the bars). data-points counts
// the segments drawn: finite values above 0.
std::string RenderStackedBars(const Chart& chart);

// Escapes & < > " ' for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);

// About `target` round ticks (1, 2 or 5 times a power of ten) from at or
// below lo to at or above hi.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: as many decimals as `step` needs, k/M for large numbers.
std::string FormatTick(double value, double step, AxisFormat format);

// A value for a tooltip: 4 significant digits, or a percentage.
std::string FormatValue(double value, AxisFormat format);

}  // namespace topspin::perf_internal
