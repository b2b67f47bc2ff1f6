#include "common/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include "common/display_text.h"
#include "common/order_statistics.h"
#include "common/report/svg_chart.h"

namespace dslaunch::report {
namespace {

constexpr char kStyle[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:24px auto;"
    "max-width:1500px;padding:0 16px}"
    "h1{font-size:20px;margin:0 0 4px}.source{color:#666;margin:0 0 12px;font-size:12px}"
    "#summary{font-size:15px}ul#generations,ul#notes{padding-left:20px}"
    "#notes li{color:#8a4b00}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}"
    "figure.chart-box{margin:0;border:1px solid #ddd;border-radius:6px;padding:8px 8px 4px}"
    "figcaption{font-weight:600;margin:0 0 4px 4px}svg.chart{width:100%;height:auto;display:block}"
    "svg .grid{stroke:#e6e6e6}svg .frame,svg .tick-mark{stroke:#888}"
    "svg text{font-size:11px;fill:#444}svg .axis-title{font-size:12px;fill:#222}"
    "svg polyline{stroke-width:1.6}svg .no-data{font-size:14px;fill:#999}"
    "ul.legend{list-style:none;margin:4px;padding:0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px}"
    ".swatch{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}"
    "h2{font-size:16px;margin:20px 0 6px}pre{background:#f6f8fa;border:1px solid #ddd;border-radius:6px;"
    "padding:8px;white-space:pre-wrap;word-break:break-all;font:12px/1.4 ui-monospace,monospace}";

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string Plural(int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string SegmentLabel(const RunSegment& s, size_t index) {
  return s.generation ? "generation " + std::to_string(*s.generation) : "run " + std::to_string(index + 1);
}

bool CountsSamples(const MetricsLog& log) {
  return !log.segments.empty() &&
         std::all_of(log.segments.begin(), log.segments.end(), [](const RunSegment& s) { return s.model == "mlp"; });
}

std::string LossChart(const MetricsLog& log) {
  LineChart chart{"loss-chart", "Training loss", "step", "loss", true, {}};
  for (size_t g = 0; g < log.segments.size(); ++g) {
    ChartSeries s{SegmentLabel(log.segments[g], g), {}, {}};
    for (const StepPoint& p : log.steps) {
      if (p.segment != static_cast<int>(g)) continue;
      s.x.push_back(static_cast<double>(p.step));
      s.y.push_back(p.loss);
    }
    if (!s.x.empty()) chart.series.push_back(std::move(s));
  }
  return RenderLineChart(chart);
}

std::string ValidationChart(const MetricsLog& log) {
  LineChart chart{"val-loss-chart", "Validation loss", "step", "validation loss", true, {}};
  ChartSeries s{"validation loss", {}, {}};
  for (const ValidationPoint& v : log.validations) {
    s.x.push_back(static_cast<double>(v.step));
    s.y.push_back(v.val_loss);
  }
  if (!s.x.empty()) chart.series.push_back(std::move(s));
  return RenderLineChart(chart);
}

std::string ThroughputChart(const MetricsLog& log) {
  const std::string unit = CountsSamples(log) ? "samples/s" : "tokens/s";
  LineChart chart{"throughput-chart", "Throughput (" + unit + ")", "step", unit, true, {}};
  ChartSeries s{unit, {}, {}};
  for (const StepPoint& p : log.steps) {
    s.x.push_back(static_cast<double>(p.step));
    s.y.push_back(p.tokens_per_s);
  }
  if (!s.x.empty()) chart.series.push_back(std::move(s));
  return RenderLineChart(chart);
}

// A figure of every step record as one line, the way the loss is drawn: `value` of each step.
std::string StepFigureChart(const MetricsLog& log, LineChart chart, double StepPoint::*value) {
  ChartSeries s{chart.y_label, {}, {}};
  for (const StepPoint& p : log.steps) {
    s.x.push_back(static_cast<double>(p.step));
    s.y.push_back(p.*value);
  }
  const bool any = std::any_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); });
  if (any) chart.series.push_back(std::move(s));
  return RenderLineChart(chart);
}

// A value per rank and step: a line per rank up to kMaxRankLines ranks, else the median, the 90th
// percentile and the largest of each step.
std::string PerRankChart(const MetricsLog& log, LineChart chart,
                         const std::function<std::vector<double>(const StepPoint&)>& values_of) {
  std::vector<std::pair<double, std::vector<double>>> steps;  // (step, value per rank)
  size_t ranks = 0;
  for (const StepPoint& p : log.steps) {
    std::vector<double> values = values_of(p);
    if (values.empty()) continue;
    ranks = std::max(ranks, values.size());
    steps.emplace_back(static_cast<double>(p.step), std::move(values));
  }
  if (ranks <= static_cast<size_t>(kMaxRankLines)) {
    for (size_t r = 0; r < ranks; ++r) {
      ChartSeries s{"rank " + std::to_string(r), {}, {}};
      for (const auto& [x, values] : steps) {
        if (r >= values.size()) continue;
        s.x.push_back(x);
        s.y.push_back(values[r]);
      }
      chart.series.push_back(std::move(s));
    }
    return RenderLineChart(chart);
  }
  chart.title += " over " + std::to_string(ranks) + " ranks (median, 90th percentile, largest)";
  ChartSeries median{"median", {}, {}}, p90{"90th percentile", {}, {}}, largest{"largest", {}, {}};
  for (const auto& [x, values] : steps) {
    for (auto [series, q] : {std::pair{&median, 0.5}, {&p90, 0.9}, {&largest, 1.0}}) {
      series->x.push_back(x);
      series->y.push_back(NearestRankPercentile(values, q));
    }
  }
  chart.series = {median, p90, largest};
  return RenderLineChart(chart);
}

std::string RankStepChart(const MetricsLog& log) {
  return PerRankChart(log, LineChart{"rank-step-chart", "Step time per rank", "step", "ms per step", true, {}},
                      [](const StepPoint& p) { return p.rank_step_ms; });
}

// A rank's own work: its step time less the time it spent inside collectives, where ranks wait
// for each other. The rank that keeps the others waiting has the highest line.
std::string RankComputeChart(const MetricsLog& log) {
  return PerRankChart(
      log, LineChart{"rank-compute-chart", "Time outside collectives per rank", "step", "ms per step", true, {}},
      [](const StepPoint& p) {
        std::vector<double> out;
        if (p.rank_collective_ms.size() != p.rank_step_ms.size()) return out;
        for (size_t r = 0; r < p.rank_step_ms.size(); ++r) out.push_back(p.rank_step_ms[r] - p.rank_collective_ms[r]);
        return out;
      });
}

std::string Summary(const MetricsLog& log) {
  if (log.segments.empty() && log.steps.empty()) return "No training records in this file.";
  const RunSegment& first = log.segments.front();
  std::string text = "Model " + EscapeHtml(first.model.empty() ? "?" : first.model);
  if (first.parameters > 0) text += ", " + std::to_string(first.parameters) + " parameters";
  text += ", " + Plural(first.world_size, "rank") + ", ZeRO stage " + std::to_string(first.zero_stage);
  if (!first.precision.empty()) text += ", " + EscapeHtml(first.precision);
  if (!first.sgemm_kernel.empty() && std::isfinite(first.sgemm_gflops)) {
    text += ", OpenBLAS " + EscapeHtml(first.sgemm_kernel) + " kernels (" + Format("%.1f", first.sgemm_gflops) +
            " GFLOP/s)";
  }
  text += "; " + Plural(static_cast<int64_t>(log.segments.size()), "generation");
  if (log.steps.empty()) return text + "; no step completed.";
  const StepPoint& last = log.steps.back();
  text += "; last step " + std::to_string(last.step);
  if (std::isfinite(last.loss)) text += ", loss " + Format("%.4f", last.loss);
  if (!log.validations.empty() && std::isfinite(log.validations.back().val_loss)) {
    text += ", validation loss " + Format("%.4f", log.validations.back().val_loss) + " (step " +
            std::to_string(log.validations.back().step) + ")";
  }
  std::vector<double> rates;
  for (const StepPoint& p : log.steps) rates.push_back(p.tokens_per_s);
  const double median = NearestRankPercentile(rates, 0.5);
  if (std::isfinite(median)) {
    text += "; median " + Format("%.0f", median) + (CountsSamples(log) ? " samples/s" : " tokens/s");
  }
  const bool finished = !log.segments.empty() && log.segments.back().ended;
  return text + (finished ? "; finished." : "; did not finish (no end record).");
}

// "1h 2m 3.4 s", "2m 5.0 s", "12.3 s".
std::string Duration(int64_t ms) {
  const int64_t h = ms / 3600000, m = ms / 60000 % 60;
  const double sec = static_cast<double>(ms % 60000) / 1000.0;
  std::string out;
  if (h > 0) out += std::to_string(h) + "h ";
  if (h > 0 || m > 0) out += std::to_string(m) + "m ";
  return out + Format("%.1f s", sec);
}

// The job's wall time: from the first run's start to the last exit recorded (restarts and the
// time between them included).
std::string WallTime(const MetricsLog& log) {
  std::optional<int64_t> start, end;
  for (const RunSegment& s : log.segments) {
    if (s.started_ms && (!start || *s.started_ms < *start)) start = s.started_ms;
    if (s.ended_ms && (!end || *s.ended_ms > *end)) end = s.ended_ms;
  }
  std::string text;
  if (!start || !end || *end < *start) {
    text = "Wall time: not recorded (the records have no start time or no exit record: a runtime from before "
           "them, or a rank 0 killed before it could write one).";
  } else {
    text = "Wall time: " + Duration(*end - *start) + ", from the first run's start to the last exit recorded";
    if (log.segments.back().ended_ms) {
      text += ".";
    } else {
      text += " (the last run wrote no exit record: it was killed, so it ran longer).";
    }
  }
  return "<p id=\"wall-time\">" + EscapeHtml(text) + "</p>";
}

// An argument as a POSIX shell reads it back: plain when it holds only safe characters, else in
// single quotes.
std::string ShellWord(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The last run's command line and train.json, as it recorded them.
std::string CommandAndConfig(const MetricsLog& log) {
  const RunSegment* run = nullptr;
  for (const RunSegment& s : log.segments) {
    if (!s.command.empty() || !s.config.empty()) run = &s;
  }
  if (run == nullptr) return "";
  std::string command;
  for (const std::string& arg : run->command) command += (command.empty() ? "" : " ") + ShellWord(arg);
  std::string out = "<section id=\"run-config\"><h2>Command and config</h2>";
  if (!command.empty()) out += "<pre id=\"command\">" + EscapeHtml(DisplayText(command)) + "</pre>";
  if (!run->config.empty()) out += "<pre id=\"config\">" + EscapeHtml(DisplayText(run->config)) + "</pre>";
  return out + "</section>";
}

// The last generated sample, as text: control bytes escaped and invalid UTF-8 replaced again
// (a file from an older runtime, or written by another program, may hold them raw).
std::string Sample(const MetricsLog& log) {
  for (auto it = log.segments.rbegin(); it != log.segments.rend(); ++it) {
    if (it->sample) {
      return "<section id=\"sample\"><h2>Sample</h2><pre id=\"sample-text\">" + EscapeHtml(DisplayText(*it->sample)) +
             "</pre></section>";
    }
  }
  return "";
}

std::string Notes(const MetricsLog& log) {
  std::string out;
  if (log.malformed > 0) {
    out += "<li class=\"malformed\">" + Plural(log.malformed, "line") + " skipped as unreadable (first: line " +
           std::to_string(log.first_malformed->line) + ", " + EscapeHtml(log.first_malformed->reason) + ")</li>";
  }
  int64_t nonfinite = 0, skipped = 0;
  for (const RunSegment& s : log.segments) {
    nonfinite += s.nonfinite_losses;
    skipped += s.skipped_steps;
  }
  if (nonfinite > 0) {
    out += "<li class=\"nonfinite\">" + Plural(nonfinite, "step") +
           " with a non-finite loss (not drawn: gaps in the loss line)</li>";
  }
  if (skipped > 0) {
    out += "<li class=\"skipped\">" + Plural(skipped, "step") + " skipped by the fp16 loss scaler (overflow)</li>";
  }
  return out.empty() ? "" : "<ul id=\"notes\">" + out + "</ul>";
}

}  // namespace

std::string GenerationLine(const RunSegment& s, size_t index) {
  std::string line = SegmentLabel(s, index);
  if (!s.reason.empty()) line += " (" + s.reason + ")";
  line += ": " + Plural(s.world_size, "rank");
  if (s.resumed_step) line += ", resumed from step " + std::to_string(*s.resumed_step);
  if (s.seconds_lost) line += ", " + Format("%.2f", *s.seconds_lost) + " s lost";
  if (s.steps_recorded == 0) {
    line += ", no step completed";
  } else {
    line += ", steps " + std::to_string(s.first_step) + "-" + std::to_string(s.last_step);
    if (std::isfinite(s.last_loss)) line += ", last loss " + Format("%.4f", s.last_loss);
  }
  if (s.checkpoints > 0) line += ", " + Plural(s.checkpoints, "checkpoint");
  if (s.checkpoints_failed > 0) line += ", " + Plural(s.checkpoints_failed, "failed checkpoint");
  return line + (s.ended ? ", finished" : ", ended early (failed, stopped or restarted)");
}

std::string RenderReport(const MetricsLog& log, const ReportPage& page) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                    EscapeHtml(page.title) + " - dslaunch report</title><style>" + kStyle + "</style></head><body>";
  out += "<h1>" + EscapeHtml(page.title) + "</h1><p class=\"source\">from " + EscapeHtml(page.source) + "</p>";
  out += "<p id=\"summary\">" + Summary(log) + "</p>";
  out += "<ul id=\"generations\">";
  for (size_t i = 0; i < log.segments.size(); ++i) {
    const RunSegment& s = log.segments[i];
    out += "<li class=\"generation\" data-generation=\"" +
           (s.generation ? std::to_string(*s.generation) : std::string()) + "\">" +
           EscapeHtml(GenerationLine(s, i)) + "</li>";
  }
  out += "</ul>" + WallTime(log) + Notes(log);
  out += "<div class=\"charts\">" + LossChart(log) + ValidationChart(log) + ThroughputChart(log) +
         StepFigureChart(log, LineChart{"lr-chart", "Learning rate", "step", "learning rate", true, {}}, &StepPoint::lr) +
         StepFigureChart(log, LineChart{"grad-norm-chart", "Gradient norm (unscaled)", "step", "gradient norm", true, {}},
                         &StepPoint::grad_norm) +
         StepFigureChart(log, LineChart{"loss-scale-chart", "Loss scale", "step", "loss scale", true, {}},
                         &StepPoint::loss_scale) +
         RankStepChart(log) + RankComputeChart(log) + "</div>";
  out += Sample(log) + CommandAndConfig(log);
  return out + "</body></html>\n";
}

}  // namespace dslaunch::report
