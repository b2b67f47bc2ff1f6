// Order statistics of a sample, pure: the median the straggler rule compares (launcher/status/
// straggler_detector.cc) and the percentiles the report's charts draw (common/report/html_report.cc).
#pragma once

#include <vector>

namespace dslaunch {

// The median of `values` (non-empty): the middle value of an odd count, the mean of the two
// middle values of an even one.
double Median(std::vector<double> values);

// The nearest-rank percentile: the smallest of the finite `values` with at least a fraction `q`
// (0..1) of them at or below it; the smallest value for q = 0. NaN when no value is finite
// (infinities and NaNs are left out).
double NearestRankPercentile(std::vector<double> values, double q);

}  // namespace dslaunch
