// The job's report.html (docs/observability.md, "Report at the end"): one self-contained HTML
// page (inline CSS and SVG, no script, nothing fetched) from a job's metrics records. Pure: the
// same records give the same bytes.
//
// Stable ids for tests and readers: #summary (one paragraph), #generations with one
// <li class="generation"> per worker run, #notes (skipped lines, non-finite losses), and the
// charts #loss-chart, #val-loss-chart, #throughput-chart, #rank-step-chart, #rank-compute-chart
// (svg_chart.h).
#pragma once

#include <string>

#include "common/report/metrics_log.h"

namespace dslaunch::report {

// Up to this many ranks the per-rank charts have a line per rank; beyond, the lines would be a
// tangle and the colours repeat, so they show the median, the 90th percentile and the largest
// value of each step instead.
constexpr int kMaxRankLines = 16;

struct ReportPage {
  std::string title;   // the job's name, e.g. its directory's
  std::string source;  // the metrics file it was made from, shown under the title
};

std::string RenderReport(const MetricsLog& log, const ReportPage& page);

// "generation 1 (node lost): 3 ranks, resumed from step 40, 6.81 s lost, steps 41-100, last loss
// 2.6131, 2 checkpoints, finished": one segment (run `index` of the file) in one line.
std::string GenerationLine(const RunSegment& segment, size_t index);

}  // namespace dslaunch::report
