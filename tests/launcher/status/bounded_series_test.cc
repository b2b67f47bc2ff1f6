// BoundedSeries: a curve of any length in at most max_points, evenly thinned, the latest shown.
#include "launcher/status/bounded_series.h"

#include <doctest/doctest.h>

#include <algorithm>

namespace dslaunch::launcher {
namespace {

TEST_CASE("A series keeps every point until the limit") {
  BoundedSeries s(8);
  CHECK(s.Points().empty());
  CHECK_FALSE(s.latest());
  for (int i = 0; i < 7; ++i) s.Add({i, i * 0.5});
  REQUIRE(s.Points().size() == 7);
  CHECK(s.Points()[6].step == 6);
  CHECK(s.latest()->value == 3.0);
}

TEST_CASE("A million points stay within the limit, evenly spread, the first and the latest kept") {
  constexpr size_t kMax = 100;
  BoundedSeries s(kMax);
  size_t largest = 0;
  for (int64_t i = 0; i < 1000000; ++i) {
    s.Add({i, static_cast<double>(i)});
    if (i % 97 == 0) largest = std::max(largest, s.Points().size());
  }
  CHECK(largest <= kMax);
  const auto points = s.Points();
  CHECK(points.size() >= kMax / 2);
  CHECK(points.front().step == 0);
  CHECK(points.back().step == 999999);
  // Evenly: every gap between kept points (the latest aside) is the same stride.
  const int64_t stride = points[1].step - points[0].step;
  CHECK(stride > 1);
  for (size_t i = 1; i + 1 < points.size(); ++i) CHECK(points[i].step - points[i - 1].step == stride);
  CHECK(points.back().step - points[points.size() - 2].step <= stride);
}

}  // namespace
}  // namespace dslaunch::launcher
