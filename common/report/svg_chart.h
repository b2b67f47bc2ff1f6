// Line charts as inline SVG for the report (docs/observability.md, "Report at the end"): no
// script, no external resource; the text is escaped. Pure.
//
// Each chart is a <figure> holding <svg id="ID" class="chart">, one
// <g class="series" data-label="..." data-points="N" data-total="M"> per series (N points drawn
// of M given) with its <polyline>s and, for a series of at most kMaxMarkedPoints drawn points, one
// <circle class="point"> per point with a <title> tooltip; then an HTML legend. Tests and readers
// rely on these ids, classes and attributes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::report {

// A series longer than this is thinned to every k-th point (k = ceil(M / kMaxPointsPerSeries)),
// its last point kept: a 100 000-step run stays a file of a few hundred kB, and 400 points are
// more than a 720-pixel-wide plot can show apart.
constexpr size_t kMaxPointsPerSeries = 400;
// Circles (hover tooltips) only where they stay apart and the file small.
constexpr size_t kMaxMarkedPoints = 200;

struct ChartSeries {
  std::string label;           // legend text (escaped when rendered)
  std::vector<double> x;       // same length as y
  std::vector<double> y;       // a non-finite value is not drawn and breaks the line
};

struct LineChart {
  std::string id;              // the <svg>'s id: [a-z0-9-]
  std::string title;
  std::string x_label;
  std::string y_label;
  bool integer_x = true;       // x ticks at whole numbers (steps)
  std::vector<ChartSeries> series;
};

std::string RenderLineChart(const LineChart& chart);

// The indices of `count` points to draw: all of them up to kMaxPointsPerSeries, else every k-th
// and the last.
std::vector<size_t> ThinnedIndices(size_t count);

// About `target` round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi];
// lo < hi, both finite.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: "%g" with up to 4 significant digits, "12k"/"3.5M" for large values.
std::string TickLabel(double value);

// & < > " ' as character references: safe in text and in attribute values.
std::string EscapeHtml(std::string_view text);

}  // namespace dslaunch::report
