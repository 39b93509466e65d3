#include "perf/svg_chart.h"

#include <cmath>

#include <gtest/gtest.h>

namespace topspin::perf_internal {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChart, NiceTicksAreRoundAndCoverTheRange) {
  const auto small = NiceTicks(0, 0.93, 5);
  ASSERT_EQ(small.size(), 6u);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_NEAR(small[i], 0.2 * double(i), 1e-12);
  const auto big = NiceTicks(12, 187000, 5);
  EXPECT_EQ(big.front(), 0);
  EXPECT_EQ(big.back(), 200000);
  EXPECT_EQ(big[1], 50000);
  const auto negative = NiceTicks(-0.3, 0.1, 4);
  EXPECT_NEAR(negative.front(), -0.3, 1e-12);
  EXPECT_NEAR(negative.back(), 0.1, 1e-12);
  const auto flat = NiceTicks(5, 5, 5);  // a flat range still gets an axis
  EXPECT_EQ(flat.front(), 5);
  EXPECT_EQ(flat.back(), 6);
}

TEST(SvgChart, TickLabelsUseTheStepsPrecisionAndSuffixes) {
  EXPECT_EQ(FormatTick(150000, 50000, AxisFormat::kNumber), "150k");
  EXPECT_EQ(FormatTick(400000, 100000, AxisFormat::kNumber), "400k");
  EXPECT_EQ(FormatTick(1.5e6, 5e5, AxisFormat::kNumber), "1.5M");
  EXPECT_EQ(FormatTick(0.6000000000000001, 0.2, AxisFormat::kNumber), "0.6");
  EXPECT_EQ(FormatTick(0.25, 0.05, AxisFormat::kPercent), "25%");
  EXPECT_EQ(FormatTick(1500, 500, AxisFormat::kNumber), "1500");
  EXPECT_EQ(FormatTick(1e-17, 0.1, AxisFormat::kNumber), "0.0");
  EXPECT_EQ(FormatValue(0.123456, AxisFormat::kNumber), "0.1235");
  EXPECT_EQ(FormatValue(184256.4, AxisFormat::kNumber), "184256");
  EXPECT_EQ(FormatValue(0.5, AxisFormat::kPercent), "50.0%");
}

TEST(SvgChart, EscapesHtml) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST(SvgChart, LinesCountWhatTheyDrawAndBreakAtGaps) {
  Chart c{.name = "t", .title = "T <1>", .x_label = "step", .y_label = "v"};
  c.series.push_back({"a", "#123456", {1, 2, 3, 4, 5}, {1, 2, NAN, 4, 5}});
  c.series.push_back({"empty", "#654321", {1, 2}, {NAN, INFINITY}});
  const std::string svg = RenderLineChart(c);
  EXPECT_NE(svg.find("data-plot=\"t\" data-series=\"1\" data-points=\"4\""), std::string::npos)
      << svg.substr(0, 300);
  EXPECT_EQ(Count(svg, "<path d=\"M"), 1u);
  EXPECT_EQ(Count(svg, " M"), 1u);  // the gap starts a second run of the path
  EXPECT_EQ(Count(svg, "<circle"), 4u);
  EXPECT_NE(svg.find("T &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(svg.find(">empty</text>"), std::string::npos);  // nothing drawn, no legend entry
  EXPECT_NE(svg.find(">a</text>"), std::string::npos);
}

TEST(SvgChart, LongSeriesKeepOnlyIsolatedMarkers) {
  Chart c{.name = "t", .title = "T", .x_label = "step", .y_label = "v"};
  ChartSeries s{"a", "#123456", {}, {}};
  for (int i = 0; i < 500; ++i) {
    s.x.push_back(i);
    s.y.push_back(i == 250 || i == 252 ? NAN : i);  // 251 stands alone
  }
  c.series.push_back(s);
  const std::string svg = RenderLineChart(c);
  EXPECT_NE(svg.find("data-points=\"498\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<circle"), 1u);
}

TEST(SvgChart, StackedBarsCountSegmentsAboveZero) {
  Chart c{.name = "bars", .title = "B", .x_label = "step", .y_label = "ms"};
  c.series.push_back({"forward", "#111", {10, 20, 30}, {1, 2, 3}});
  c.series.push_back({"sync", "#222", {10, 20, 30}, {0, 0, 0}});
  c.series.push_back({"other", "#333", {10, 20, 30}, {0.5, NAN, 0.5}});
  const std::string svg = RenderStackedBars(c);
  EXPECT_NE(svg.find("data-series=\"2\" data-points=\"5\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<rect") - 2, 5u);  // less the two legend swatches
  EXPECT_NE(svg.find("<title>step 20: forward 2</title>"), std::string::npos);
}

TEST(SvgChart, AChartWithoutDataSaysWhy) {
  Chart c{.name = "v", .title = "V", .x_label = "step", .y_label = "score"};
  c.empty_note = "no evaluation records";
  const std::string svg = RenderLineChart(c);
  EXPECT_NE(svg.find("data-series=\"0\" data-points=\"0\""), std::string::npos);
  EXPECT_NE(svg.find("no evaluation records"), std::string::npos);
  EXPECT_NE(RenderStackedBars(c).find("data-points=\"0\""), std::string::npos);
}

}  // namespace
}  // namespace topspin::perf_internal
