#include "common/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dslaunch::report {
namespace {

// Geometry of one chart, in SVG user units (the <svg> scales to its container's width).
constexpr double kWidth = 720;
constexpr double kHeight = 280;
constexpr double kLeft = 64;    // room for the y tick labels and the axis title
constexpr double kRight = 16;
constexpr double kTop = 16;
constexpr double kBottom = 44;  // room for the x tick labels and the axis title
constexpr int kTargetTicks = 6;

// Distinct hues that stay apart on white (Tableau 10); series beyond 10 reuse them.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string Color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

struct Range {
  double lo = 0, hi = 0;
  bool empty = true;
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = empty ? v : std::min(lo, v);
    hi = empty ? v : std::max(hi, v);
    empty = false;
  }
  // A range with width, so that a constant series sits in the middle of the plot.
  void Widen() {
    if (empty) lo = 0, hi = 1;
    if (hi > lo) return;
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
};

struct Frame {
  Range x, y;
  double Px(double v) const { return kLeft + (v - x.lo) / (x.hi - x.lo) * (kWidth - kLeft - kRight); }
  double Py(double v) const { return kHeight - kBottom - (v - y.lo) / (y.hi - y.lo) * (kHeight - kTop - kBottom); }
};

void Axes(const LineChart& chart, Frame& frame, std::string& out) {
  std::vector<double> xt = NiceTicks(frame.x.lo, frame.x.hi, kTargetTicks);
  if (chart.integer_x) {
    xt.erase(std::remove_if(xt.begin(), xt.end(), [](double v) { return v != std::floor(v); }), xt.end());
  }
  const std::vector<double> yt = NiceTicks(frame.y.lo, frame.y.hi, kTargetTicks);
  // The plot spans the outer ticks, so that the axes end on labelled values.
  frame.y.lo = std::min(frame.y.lo, yt.front());
  frame.y.hi = std::max(frame.y.hi, yt.back());
  out += "<g class=\"axis y-axis\">";
  for (double v : yt) {
    const std::string py = Fixed(frame.Py(v));
    out += "<line class=\"grid\" x1=\"" + Fixed(kLeft) + "\" x2=\"" + Fixed(kWidth - kRight) + "\" y1=\"" + py +
           "\" y2=\"" + py + "\"/><text class=\"tick\" x=\"" + Fixed(kLeft - 6) + "\" y=\"" + py +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + TickLabel(v) + "</text>";
  }
  out += "</g><g class=\"axis x-axis\">";
  for (double v : xt) {
    if (v < frame.x.lo || v > frame.x.hi) continue;
    const std::string px = Fixed(frame.Px(v));
    out += "<line class=\"tick-mark\" x1=\"" + px + "\" x2=\"" + px + "\" y1=\"" + Fixed(kHeight - kBottom) +
           "\" y2=\"" + Fixed(kHeight - kBottom + 4) + "\"/><text class=\"tick\" x=\"" + px + "\" y=\"" +
           Fixed(kHeight - kBottom + 16) + "\" text-anchor=\"middle\">" + TickLabel(v) + "</text>";
  }
  out += "</g><line class=\"frame\" x1=\"" + Fixed(kLeft) + "\" x2=\"" + Fixed(kWidth - kRight) + "\" y1=\"" +
         Fixed(kHeight - kBottom) + "\" y2=\"" + Fixed(kHeight - kBottom) + "\"/>";
  out += "<text class=\"axis-title\" x=\"" + Fixed((kLeft + kWidth - kRight) / 2) + "\" y=\"" + Fixed(kHeight - 6) +
         "\" text-anchor=\"middle\">" + EscapeHtml(chart.x_label) + "</text>";
  out += "<text class=\"axis-title\" transform=\"translate(14 " + Fixed((kTop + kHeight - kBottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + EscapeHtml(chart.y_label) + "</text>";
}

void Series(const ChartSeries& s, size_t index, const Frame& frame, std::string& out) {
  const size_t count = std::min(s.x.size(), s.y.size());
  const std::vector<size_t> thinned = ThinnedIndices(count);
  std::vector<size_t> drawn;
  for (size_t i : thinned) {
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) drawn.push_back(i);
  }
  const std::string color = Color(index);
  out += "<g class=\"series\" data-label=\"" + EscapeHtml(s.label) + "\" data-points=\"" +
         std::to_string(drawn.size()) + "\" data-total=\"" + std::to_string(count) + "\" stroke=\"" + color +
         "\" fill=\"" + color + "\">";
  // A line per run of drawn points that are neighbours among the thinned ones: a non-finite
  // value in between breaks it.
  std::string line;
  size_t run = 0;
  auto flush = [&] {
    if (run > 1) out += "<polyline fill=\"none\" points=\"" + line + "\"/>";
    line.clear();
    run = 0;
  };
  for (size_t i : thinned) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
      flush();
      continue;
    }
    if (run > 0) line += ' ';
    line += Fixed(frame.Px(s.x[i])) + "," + Fixed(frame.Py(s.y[i]));
    ++run;
  }
  flush();
  if (drawn.size() <= kMaxMarkedPoints) {
    for (size_t i : drawn) {
      out += "<circle class=\"point\" r=\"2.5\" cx=\"" + Fixed(frame.Px(s.x[i])) + "\" cy=\"" +
             Fixed(frame.Py(s.y[i])) + "\"><title>" + EscapeHtml(s.label) + ": " + TickLabel(s.x[i]) + ", " +
             TickLabel(s.y[i]) + "</title></circle>";
    }
  }
  out += "</g>";
}

}  // namespace

std::vector<size_t> ThinnedIndices(size_t count) {
  std::vector<size_t> out;
  if (count == 0) return out;
  const size_t stride = (count + kMaxPointsPerSeries - 1) / kMaxPointsPerSeries;
  for (size_t i = 0; i < count; i += stride) out.push_back(i);
  if (out.back() != count - 1) out.push_back(count - 1);
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  // Multiples of the step (not a running sum: no "1e-17" for zero), up to the first >= hi.
  for (double k = std::floor(lo / step);; k += 1) {
    const double v = k * step;
    ticks.push_back(v == 0 ? 0.0 : v);  // no "-0"
    if (v >= hi) break;
  }
  return ticks;
}

std::string TickLabel(double value) {
  char buf[32];
  const double a = std::fabs(value);
  if (a >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.4gM", value / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.4gk", value / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g", value);
  }
  return buf;
}

std::string EscapeHtml(std::string_view text) {
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

std::string RenderLineChart(const LineChart& chart) {
  Frame frame;
  size_t points = 0;
  for (const ChartSeries& s : chart.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      frame.x.Add(s.x[i]);
      frame.y.Add(s.y[i]);
      ++points;
    }
  }
  frame.x.Widen();
  frame.y.Widen();
  std::string out = "<figure class=\"chart-box\"><figcaption>" + EscapeHtml(chart.title) + "</figcaption>";
  out += "<svg id=\"" + EscapeHtml(chart.id) + "\" class=\"chart\" viewBox=\"0 0 " + Fixed(kWidth) + " " +
         Fixed(kHeight) + "\" role=\"img\" aria-label=\"" + EscapeHtml(chart.title) + "\">";
  if (points == 0) {
    out += "<text class=\"no-data\" x=\"" + Fixed(kWidth / 2) + "\" y=\"" + Fixed(kHeight / 2) +
           "\" text-anchor=\"middle\">no data</text></svg></figure>";
    return out;
  }
  Axes(chart, frame, out);
  for (size_t i = 0; i < chart.series.size(); ++i) Series(chart.series[i], i, frame, out);
  out += "</svg>";
  if (chart.series.size() > 1) {
    out += "<ul class=\"legend\">";
    for (size_t i = 0; i < chart.series.size(); ++i) {
      out += "<li><span class=\"swatch\" style=\"background:" + Color(i) + "\"></span>" +
             EscapeHtml(chart.series[i].label) + "</li>";
    }
    out += "</ul>";
  }
  out += "</figure>";
  return out;
}

}  // namespace dslaunch::report
