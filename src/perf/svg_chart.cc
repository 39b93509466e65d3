#include "perf/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace topspin::perf_internal {
namespace {

// Geometry of every chart in SVG user units; the page scales the SVG to the
// width of its column, so only the proportions matter.
constexpr double kWidth = 640;
constexpr double kLeft = 66;  // y tick labels and the y label
constexpr double kRight = 18;
constexpr double kTop = 40;  // the title
constexpr double kPlotHeight = 210;
constexpr double kBottom = kTop + kPlotHeight;
constexpr double kAxisBelow = 44;  // x tick labels and the x label
constexpr double kLegendRow = 18;
constexpr double kCharWidth = 6.4;  // of an 11px sans-serif glyph, for laying out the legend
// Series with more points than this are drawn as bare lines: a marker per
// point would hide the line and bloat the page.
constexpr size_t kMarkerLimit = 120;

struct Range {
  double lo = 0;
  double hi = 1;
};

// Maps data coordinates into the plot area.
struct Frame {
  Range x, y;
  double Px(double v) const {
    return kLeft + (v - x.lo) / (x.hi - x.lo) * (kWidth - kLeft - kRight);
  }
  double Py(double v) const { return kBottom - (v - y.lo) / (y.hi - y.lo) * kPlotHeight; }
};

bool Finite(const ChartSeries& s, size_t i) {
  return i < s.y.size() && i < s.x.size() && std::isfinite(s.x[i]) && std::isfinite(s.y[i]);
}

size_t FinitePoints(const ChartSeries& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.y.size(); ++i) n += Finite(s, i) ? 1 : 0;
  return n;
}

// Ticks and the y range they span, which the plot snaps to.
std::vector<double> YTicks(double lo, double hi, bool from_zero, Range& range) {
  if (from_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (hi <= lo) {  // a flat series: give it some room
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    hi = lo + pad;
    if (!(from_zero && lo == 0)) lo -= pad;
  }
  auto ticks = NiceTicks(lo, hi, 5);
  range = {ticks.front(), ticks.back()};
  return ticks;
}

// Steps are integers: their ticks are too.
std::vector<double> XTicks(Range range, bool integral) {
  std::vector<double> ticks;
  for (double t : NiceTicks(range.lo, range.hi, 6)) {
    if (t < range.lo - 1e-9 || t > range.hi + 1e-9) continue;
    if (integral && t != std::floor(t)) continue;
    ticks.push_back(t);
  }
  return ticks;
}

double TickStep(const std::vector<double>& ticks) {
  return ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
}

std::string Header(const Chart& chart, double height, size_t series, size_t points) {
  return fmt::format(
      "<svg class=\"plot\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" "
      "aria-label=\"{}\" data-plot=\"{}\" data-series=\"{}\" data-points=\"{}\" "
      "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\" "
      "font-size=\"11\">\n"
      "<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"600\" fill=\"#1f2328\">{}</text>\n",
      kWidth, height, HtmlEscape(chart.title), HtmlEscape(chart.name), series, points, kLeft,
      HtmlEscape(chart.title));
}

// Grid, axes, tick labels and axis labels.
std::string Axes(const Chart& chart, const Frame& f, const std::vector<double>& y_ticks,
                 const std::vector<std::pair<double, std::string>>& x_ticks) {
  std::string out;
  const double right = kWidth - kRight;
  const double y_step = TickStep(y_ticks);
  for (double t : y_ticks) {
    const double y = f.Py(t);
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e8eaed\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#57606a\">{}</text>\n",
        kLeft, right, y, y, kLeft - 6, y + 4, HtmlEscape(FormatTick(t, y_step, chart.y_format)));
  }
  for (const auto& [x, label] : x_ticks) {
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#8c959f\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>\n",
        x, x, kBottom, kBottom + 4, x, kBottom + 16, HtmlEscape(label));
  }
  out += fmt::format(
      "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#8c959f\"/>"
      "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#8c959f\"/>\n",
      kLeft, right, kBottom, kBottom, kLeft, kLeft, kTop, kBottom);
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>\n"
      "<text transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\" "
      "fill=\"#57606a\">{}</text>\n",
      (kLeft + right) / 2, kBottom + 34, HtmlEscape(chart.x_label), kTop + kPlotHeight / 2,
      HtmlEscape(chart.y_label));
  return out;
}

struct Legend {
  std::string svg;
  int rows = 0;
};

// Swatches and names left to right, wrapping at the plot's width.
Legend LayoutLegend(const std::vector<const ChartSeries*>& drawn) {
  Legend legend;
  if (drawn.empty()) return legend;
  const double top = kBottom + kAxisBelow + 4;
  double x = kLeft;
  int row = 0;
  for (const ChartSeries* s : drawn) {
    const double width = 12 + 5 + kCharWidth * double(s->name.size()) + 16;
    if (x + width > kWidth - kRight && x > kLeft) {
      x = kLeft;
      ++row;
    }
    const double y = top + row * kLegendRow;
    legend.svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"10\" rx=\"2\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#1f2328\">{}</text>\n",
        x, y - 9, HtmlEscape(s->color), x + 17, y, HtmlEscape(s->name));
    x += width;
  }
  legend.rows = row + 1;
  return legend;
}

double Height(const Legend& legend) {
  return kBottom + kAxisBelow + legend.rows * kLegendRow + 8;
}

std::string Tooltip(const Chart& chart, const std::string& series, double x, double y) {
  return HtmlEscape(
      fmt::format("{} {}: {} {}{}{}", chart.x_label, FormatValue(x, AxisFormat::kNumber), series,
                  FormatValue(y, chart.y_format), chart.unit.empty() ? "" : " ", chart.unit));
}

std::string Empty(const Chart& chart) {
  std::string out = Header(chart, kBottom + kAxisBelow, 0, 0);
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f8fa\" stroke=\"#d0d7de\" "
      "stroke-dasharray=\"4 3\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#57606a\" font-size=\"12\">{}</text>\n"
      "</svg>\n",
      kLeft, kTop, kWidth - kLeft - kRight, kPlotHeight, (kWidth + kLeft - kRight) / 2,
      kTop + kPlotHeight / 2, HtmlEscape(chart.empty_note));
  return out;
}

// One series: a path broken at gaps, plus markers where they help.
std::string LineSeries(const Chart& chart, const ChartSeries& s, const Frame& f) {
  std::string path;
  const size_t n = std::min(s.x.size(), s.y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!Finite(s, i)) continue;
    const bool joined = i > 0 && Finite(s, i - 1);
    path += fmt::format("{}{:.1f} {:.1f} ", joined ? "L" : "M", f.Px(s.x[i]), f.Py(s.y[i]));
  }
  std::string out = fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" stroke-linejoin=\"round\" "
      "stroke-linecap=\"round\"><title>{}</title></path>\n",
      path, HtmlEscape(s.color), HtmlEscape(s.name));
  const bool all_markers = FinitePoints(s) <= kMarkerLimit;
  for (size_t i = 0; i < n; ++i) {
    if (!Finite(s, i)) continue;
    const bool isolated = !(i > 0 && Finite(s, i - 1)) && !(i + 1 < n && Finite(s, i + 1));
    if (!all_markers && !isolated) continue;
    out += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.6\" fill=\"{}\"><title>{}</title></circle>\n",
        f.Px(s.x[i]), f.Py(s.y[i]), HtmlEscape(s.color), Tooltip(chart, s.name, s.x[i], s.y[i]));
  }
  return out;
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  // Multiples of the step, so errors do not add up from tick to tick.
  const double first = std::floor(lo / step + 1e-9);
  std::vector<double> ticks;
  for (int i = 0; i < 1000; ++i) {
    double t = (first + i) * step;
    if (std::abs(t) < step * 1e-9) t = 0;  // no "-0"
    ticks.push_back(t);
    if (t >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string FormatTick(double value, double step, AxisFormat format) {
  if (std::abs(value) < std::abs(step) * 1e-9) value = 0;
  std::string suffix;
  if (format == AxisFormat::kPercent) {
    value *= 100;
    step *= 100;
    suffix = "%";
  } else if (step >= 5e5) {  // 0.5M, 1M, 1.5M rather than 500k, 1000k
    value /= 1e6;
    step /= 1e6;
    suffix = "M";
  } else if (step >= 1e3) {
    value /= 1e3;
    step /= 1e3;
    suffix = "k";
  }
  const int decimals = std::max(0, int(std::ceil(-std::log10(std::abs(step)) - 1e-9)));
  return fmt::format("{:.{}f}{}", value, std::min(decimals, 12), value == 0 ? "" : suffix);
}

std::string FormatValue(double value, AxisFormat format) {
  if (format == AxisFormat::kPercent) return fmt::format("{:.1f}%", 100 * value);
  if (std::abs(value) >= 1e4 || value == std::floor(value)) return fmt::format("{:.0f}", value);
  return fmt::format("{:.4g}", value);
}

std::string RenderLineChart(const Chart& chart) {
  std::vector<const ChartSeries*> drawn;
  size_t points = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Range x{kInf, -kInf}, y{kInf, -kInf};
  bool integral = true;
  for (const auto& s : chart.series) {
    const size_t n = FinitePoints(s);
    if (n == 0) continue;
    drawn.push_back(&s);
    points += n;
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (!Finite(s, i)) continue;
      x = {std::min(x.lo, s.x[i]), std::max(x.hi, s.x[i])};
      y = {std::min(y.lo, s.y[i]), std::max(y.hi, s.y[i])};
      integral = integral && s.x[i] == std::floor(s.x[i]);
    }
  }
  if (points == 0) return Empty(chart);
  if (x.hi <= x.lo) x = {x.lo - 1, x.hi + 1};  // one step: centre it
  Frame f;
  f.x = x;
  const auto y_ticks = YTicks(y.lo, y.hi, chart.y_from_zero, f.y);
  std::vector<std::pair<double, std::string>> x_ticks;
  const auto xs = XTicks(x, integral);
  x_ticks.reserve(xs.size());
  for (double t : xs) {
    x_ticks.push_back({f.Px(t), FormatTick(t, TickStep(xs), AxisFormat::kNumber)});
  }
  const Legend legend = LayoutLegend(drawn);
  std::string out = Header(chart, Height(legend), drawn.size(), points);
  out += Axes(chart, f, y_ticks, x_ticks);
  for (const ChartSeries* s : drawn) out += LineSeries(chart, *s, f);
  for (const ChartMarker& m : chart.markers) {
    if (!(m.x >= x.lo && m.x <= x.hi)) continue;
    const double px = f.Px(m.x);
    out += fmt::format(
        "<g class=\"marker\"><title>{0}</title><line x1=\"{1:.1f}\" x2=\"{1:.1f}\" y1=\"{2}\" "
        "y2=\"{3}\" stroke=\"#57606a\" stroke-dasharray=\"4 3\"/><text x=\"{4:.1f}\" "
        "y=\"{5}\" font-size=\"10\" fill=\"#57606a\">{0}</text></g>\n",
        HtmlEscape(m.label), px, kTop, kBottom, px + 3, kTop + 10);
  }
  out += legend.svg;
  out += "</svg>\n";
  return out;
}

std::string RenderStackedBars(const Chart& chart) {
  const size_t bars = chart.series.empty() ? 0 : chart.series.front().x.size();
  std::vector<double> totals(bars, 0);
  std::vector<const ChartSeries*> drawn;
  size_t points = 0;
  for (const auto& s : chart.series) {
    size_t n = 0;
    for (size_t i = 0; i < bars && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || s.y[i] <= 0) continue;
      totals[i] += s.y[i];
      ++n;
    }
    if (n > 0) drawn.push_back(&s);
    points += n;
  }
  if (points == 0) return Empty(chart);
  Frame f;
  f.x = {0, double(bars)};
  const auto y_ticks = YTicks(0, *std::max_element(totals.begin(), totals.end()), true, f.y);
  // About 8 labelled bars, whatever their number.
  const size_t stride = std::max<size_t>(1, (bars + 7) / 8);
  std::vector<std::pair<double, std::string>> x_ticks;
  const auto& labels = chart.series.front().x;
  for (size_t i = 0; i < bars; i += stride) {
    x_ticks.push_back({f.Px(double(i) + 0.5), FormatValue(labels[i], AxisFormat::kNumber)});
  }
  const Legend legend = LayoutLegend(drawn);
  std::string out = Header(chart, Height(legend), drawn.size(), points);
  out += Axes(chart, f, y_ticks, x_ticks);
  const double slot = f.Px(1) - f.Px(0);
  // Gaps between bars while there is room; touching bars beyond that.
  const double width = slot >= 4 ? slot * 0.78 : slot;
  for (size_t i = 0; i < bars; ++i) {
    double base = 0;
    const double left = f.Px(double(i)) + (slot - width) / 2;
    for (const ChartSeries* s : drawn) {
      if (i >= s->y.size() || !std::isfinite(s->y[i]) || s->y[i] <= 0) continue;
      const double top = f.Py(base + s->y[i]);
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">"
          "<title>{}</title></rect>\n",
          left, top, width, f.Py(base) - top, HtmlEscape(s->color),
          Tooltip(chart, s->name, labels[i], s->y[i]));
      base += s->y[i];
    }
  }
  out += legend.svg;
  out += "</svg>\n";
  return out;
}

}  // namespace topspin::perf_internal
