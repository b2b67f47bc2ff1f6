// Median and NearestRankPercentile (common/order_statistics.h) on boundary inputs and against slow
// references on random samples: one value, even and odd counts, duplicates, extremes, non-finite
// values (issue 28, "boundary inputs for every pure function").
#include "common/order_statistics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace dslaunch {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMax = std::numeric_limits<double>::max();

// The median by its definition: sort, then the middle one or the mean of the middle two.
double SlowMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The nearest-rank percentile by its definition: the smallest finite value x such that at least
// q of the finite values are <= x (the smallest value for q = 0).
double SlowPercentile(const std::vector<double>& v, double q) {
  std::vector<double> finite;
  for (double x : v) {
    if (std::isfinite(x)) finite.push_back(x);
  }
  if (finite.empty()) return NAN;
  std::vector<double> candidates = finite;
  std::sort(candidates.begin(), candidates.end());
  for (double x : candidates) {
    const double at_or_below = static_cast<double>(std::count_if(finite.begin(), finite.end(), [x](double y) {
      return y <= x;
    }));
    if (at_or_below >= q * static_cast<double>(finite.size())) return x;
  }
  return candidates.back();
}

TEST_CASE("Median: one value, odd and even counts, duplicates and extremes") {
  CHECK(Median({7}) == 7);
  CHECK(Median({3, 1}) == 2);                // even: the mean of the two middle ones
  CHECK(Median({5, 1, 3}) == 3);             // odd: the middle one, whatever the order
  CHECK(Median({4, 1, 3, 2}) == 2.5);
  CHECK(Median({2, 2, 2, 9}) == 2);          // duplicates in the middle
  CHECK(Median({1, 9, 9, 9}) == 9);
  CHECK(Median({-kMax, kMax}) == 0);         // the mean of the extremes, not an overflow to inf
  CHECK(Median({0, kMax, kMax}) == kMax);
  CHECK(Median({kMax, kMax}) == kMax);       // (a + b) / 2 would be infinite
  CHECK(Median({-kMax, -kMax}) == -kMax);
  CHECK(Median({-1e-300, 1e-300}) == 0);
}

TEST_CASE("Median matches the sorted definition on 3,000 random samples of 1 to 40 values") {
  std::mt19937_64 rng(20261128);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = 1 + rng() % 40;
    std::vector<double> v;
    // Few distinct values, so that duplicates straddle the middle often.
    for (size_t i = 0; i < n; ++i) v.push_back(static_cast<double>(rng() % 8) - 3.5);
    CAPTURE(trial);
    CHECK(Median(v) == SlowMedian(v));
  }
}

TEST_CASE("NearestRankPercentile: one value, q at 0 and 1, even and odd counts, non-finite values left out") {
  CHECK(NearestRankPercentile({7}, 0) == 7);
  CHECK(NearestRankPercentile({7}, 0.5) == 7);
  CHECK(NearestRankPercentile({7}, 1) == 7);
  CHECK(NearestRankPercentile({4, 1, 3, 2}, 0) == 1);
  CHECK(NearestRankPercentile({4, 1, 3, 2}, 0.5) == 2);  // 2 of 4 at or below 2
  CHECK(NearestRankPercentile({4, 1, 3, 2}, 0.51) == 3);
  CHECK(NearestRankPercentile({4, 1, 3, 2}, 1) == 4);
  CHECK(NearestRankPercentile({5, 1, 3}, 0.5) == 3);      // 2 of 3 at or below 3
  CHECK(NearestRankPercentile({2, 2, 2, 9}, 0.9) == 9);
  CHECK(NearestRankPercentile({2, 2, 2, 9}, 0.75) == 2);
  CHECK(NearestRankPercentile({kInf, 1, NAN, 3, -kInf}, 1) == 3);
  CHECK(std::isnan(NearestRankPercentile({}, 0.5)));
  CHECK(std::isnan(NearestRankPercentile({NAN, kInf}, 0.5)));
}

TEST_CASE("NearestRankPercentile matches the definition on 3,000 random samples, every q of 0, 0.1, ..., 1") {
  std::mt19937_64 rng(1128);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = rng() % 30;  // empty included
    std::vector<double> v;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = rng() % 20;
      v.push_back(r == 0 ? kInf : r == 1 ? NAN : static_cast<double>(r % 6));
    }
    for (int tenth = 0; tenth <= 10; ++tenth) {
      const double q = tenth / 10.0;
      CAPTURE(trial);
      CAPTURE(q);
      const double got = NearestRankPercentile(v, q), want = SlowPercentile(v, q);
      CHECK(((std::isnan(got) && std::isnan(want)) || got == want));
    }
  }
}

}  // namespace
}  // namespace dslaunch
