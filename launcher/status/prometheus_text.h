// GET /metrics: a JobView in the Prometheus text exposition format, version 0.0.4
// (docs/observability.md, "Metrics", lists every metric). Pure.
//
// Names start with dslaunch_, carry their unit (_seconds, _bytes) and end in _total for counters;
// every family has its HELP and TYPE lines, even with no sample yet. A figure never reported (an
// empty optional, a rank without a step) has no sample rather than a 0. Label values are escaped
// as the format says (backslash, double quote, newline).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/status/job_view.h"

namespace dslaunch::launcher {

// The content type of the text format, for the Content-Type header.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The job states and rank states that always get a sample (1 for the current one, or the count),
// so that a dashboard sees a 0 rather than a missing series.
inline constexpr std::string_view kJobStates[] = {"starting", "running", "stopping", "finished"};
inline constexpr std::string_view kRankStates[] = {"pending", "running", "exited", "failed", "stalled", "stopped"};

// The metrics of `view`, in the text format (every line ends with '\n').
std::string PrometheusText(const JobView& view);

// One label value escaped for the text format: \ as \\, " as \", newline as \n.
std::string EscapeLabelValue(std::string_view value);

// A sample value: shortest round-trip decimal, NaN, +Inf or -Inf.
std::string FormatSampleValue(double value);

}  // namespace dslaunch::launcher
