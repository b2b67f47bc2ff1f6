#include "common/report/svg_chart.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

namespace dslaunch::report {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

ChartSeries Line(std::string label, size_t n) {
  ChartSeries s{std::move(label), {}, {}};
  for (size_t i = 0; i < n; ++i) {
    s.x.push_back(static_cast<double>(i + 1));
    s.y.push_back(5.0 - 0.01 * static_cast<double>(i));
  }
  return s;
}

TEST_CASE("EscapeHtml escapes the five characters that matter in text and attributes") {
  CHECK(EscapeHtml(R"(<a href="x">'&'</a>)") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(EscapeHtml("rank 0") == "rank 0");
}

TEST_CASE("RenderLineChart escapes series labels and titles") {
  LineChart chart{"c", "<b>title</b>", "step", "y\"", true, {Line("<script>alert(1)</script>", 3), Line("b", 3)}};
  const std::string svg = RenderLineChart(chart);
  CHECK(svg.find("<script>") == std::string::npos);
  CHECK(svg.find("<b>") == std::string::npos);
  CHECK(svg.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
}

TEST_CASE("RenderLineChart draws one circle per point of a short series and counts them") {
  LineChart chart{"loss-chart", "Loss", "step", "loss", true, {Line("loss", 30)}};
  const std::string svg = RenderLineChart(chart);
  CHECK(svg.find("<svg id=\"loss-chart\"") != std::string::npos);
  CHECK(Count(svg, "<circle class=\"point\"") == 30);
  CHECK(svg.find("data-points=\"30\" data-total=\"30\"") != std::string::npos);
  CHECK(Count(svg, "<polyline") == 1);
}

TEST_CASE("RenderLineChart leaves non-finite values out and breaks the line there") {
  ChartSeries s = Line("loss", 10);
  s.y[4] = NAN;
  s.y[5] = INFINITY;
  const std::string svg = RenderLineChart(LineChart{"c", "t", "x", "y", true, {s}});
  CHECK(Count(svg, "<circle class=\"point\"") == 8);
  CHECK(svg.find("data-points=\"8\" data-total=\"10\"") != std::string::npos);
  CHECK(Count(svg, "<polyline") == 2);
  for (const char* number : {"\"nan", ",nan", "nan,", "\"inf", ",inf", "inf,", "\"-nan", ",-nan", "\"-inf", ",-inf"}) {
    CHECK(svg.find(number) == std::string::npos);  // no coordinate printed from a non-finite value
  }
}

TEST_CASE("RenderLineChart thins a long series and drops its circles, keeping the file small") {
  const size_t n = 100000;
  const std::string svg = RenderLineChart(LineChart{"c", "t", "x", "y", true, {Line("loss", n)}});
  CHECK(Count(svg, "<circle") == 0);
  const size_t drawn = ThinnedIndices(n).size();
  CHECK(drawn <= kMaxPointsPerSeries + 1);
  CHECK(svg.find("data-points=\"" + std::to_string(drawn) + "\" data-total=\"100000\"") != std::string::npos);
  CHECK(svg.size() < 20000);
}

TEST_CASE("ThinnedIndices keeps every point up to the limit, else every k-th and the last") {
  CHECK(ThinnedIndices(0).empty());
  CHECK(ThinnedIndices(kMaxPointsPerSeries).size() == kMaxPointsPerSeries);
  const std::vector<size_t> thinned = ThinnedIndices(1001);
  CHECK(thinned.front() == 0);
  CHECK(thinned[1] == 3);  // k = ceil(1001 / 400)
  CHECK(thinned.back() == 1000);
}

TEST_CASE("RenderLineChart of no data says so") {
  const std::string svg = RenderLineChart(LineChart{"val-loss-chart", "t", "x", "y", true, {}});
  CHECK(svg.find("no data") != std::string::npos);
  CHECK(svg.find("<svg id=\"val-loss-chart\"") != std::string::npos);
}

TEST_CASE("RenderLineChart of one constant point still has an axis") {
  ChartSeries s{"one", {1}, {2.5}};
  const std::string svg = RenderLineChart(LineChart{"c", "t", "x", "y", true, {s}});
  CHECK(Count(svg, "<circle class=\"point\"") == 1);
  CHECK(Count(svg, "class=\"tick\"") >= 3);
}

TEST_CASE("NiceTicks steps by 1, 2 or 5 times a power of ten and covers the range") {
  struct Case {
    double lo, hi;
    std::vector<double> want;
  };
  // The step: the first of 1, 2, 5, 10 times a power of ten at least (hi - lo) / (target - 1).
  for (const Case& c : {Case{0, 10, {0, 2, 4, 6, 8, 10}}, Case{2.61, 5.52, {2, 3, 4, 5, 6}},
                        Case{1, 30, {0, 10, 20, 30}}, Case{-0.3, 0.25, {-0.4, -0.2, 0, 0.2, 0.4}},
                        Case{0.0012, 0.0031, {0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035}}}) {
    CAPTURE(c.lo);
    CAPTURE(c.hi);
    const std::vector<double> got = NiceTicks(c.lo, c.hi, 6);
    REQUIRE(got.size() == c.want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(c.want[i]));
  }
}

TEST_CASE("TickLabel is short") {
  CHECK(TickLabel(0) == "0");
  CHECK(TickLabel(2.5) == "2.5");
  CHECK(TickLabel(0.0001) == "0.0001");
  CHECK(TickLabel(12000) == "12k");
  CHECK(TickLabel(3500000) == "3.5M");
}

}  // namespace
}  // namespace dslaunch::report
