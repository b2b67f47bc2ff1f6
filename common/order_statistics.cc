#include "common/order_statistics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace dslaunch {

double Median(std::vector<double> values) {
  const size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  const double upper = values[half];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half));
  // Their mean, without overflowing at a double's extremes: two of one sign by their difference
  // (which cannot overflow), two of opposite signs by their sum (which cannot either).
  return (lower < 0) == (upper < 0) ? lower + (upper - lower) / 2 : (lower + upper) / 2;
}

double NearestRankPercentile(std::vector<double> values, double q) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace dslaunch
