#include "common/endpoint/refusal_report.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

using Clock = RefusalReport::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

TEST_CASE("RefusalReport logs an episode's first refusal at once and counts the rest") {
  RefusalReport r(seconds(10), 32);
  auto first = r.Record("10.0.0.7", "64 connections from this address are in their handshake already", kT0);
  REQUIRE(first.has_value());
  CHECK(*first ==
        "refused an unauthenticated connection from 10.0.0.7: 64 connections from this address are "
        "in their handshake already (further refusals are counted and reported every 10 s)");
  for (int i = 1; i < 1000; ++i) {
    CHECK_FALSE(r.Record("10.0.0.7", "handshake not completed within 3000 ms", kT0 + milliseconds(i)).has_value());
  }
  CHECK(r.pending() == 1000);
  REQUIRE(r.due() == kT0 + seconds(10));
  CHECK(r.Flush(kT0 + seconds(9)).empty());  // not due yet
  auto lines = r.Flush(kT0 + seconds(10));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "refused 1000 unauthenticated connections from 10.0.0.7 (1000 in total) in the last 10.0 s; "
        "latest: handshake not completed within 3000 ms");
  CHECK(r.pending() == 0);
}

TEST_CASE("RefusalReport gives a continuing flood one line per interval, with a running total") {
  RefusalReport r(seconds(10), 32);
  REQUIRE(r.Record("a", "x", kT0).has_value());
  for (int i = 0; i < 9; ++i) r.Record("a", "x", kT0 + seconds(1));
  CHECK(r.Flush(kT0 + seconds(10)).size() == 1);
  // Still flooding: no new "first" line, one summary for the next interval.
  for (int i = 0; i < 5; ++i) CHECK_FALSE(r.Record("a", "y", kT0 + seconds(12)).has_value());
  REQUIRE(r.due() == kT0 + seconds(20));
  auto lines = r.Flush(kT0 + seconds(20));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "refused 5 unauthenticated connections from a (15 in total) in the last 10.0 s; latest: y");
}

TEST_CASE("RefusalReport ends an episode after a quiet interval and then logs at once again") {
  RefusalReport r(seconds(10), 32);
  REQUIRE(r.Record("a", "x", kT0).has_value());
  // A refusal from another address in the same episode is only counted.
  CHECK_FALSE(r.Record("b", "x", kT0 + seconds(1)).has_value());
  CHECK(r.Flush(kT0 + seconds(10)).size() == 1);
  REQUIRE(r.due().has_value());  // still open for one interval
  CHECK(r.Flush(kT0 + seconds(20)).empty());
  CHECK_FALSE(r.due().has_value());  // over; nothing left to do
  auto again = r.Record("a", "x", kT0 + seconds(25));
  REQUIRE(again.has_value());
  r.Record("a", "x", kT0 + seconds(26));
  auto lines = r.Flush(kT0 + seconds(35));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "refused 2 unauthenticated connections from a (2 in total) in the last 10.0 s; latest: x");
}

TEST_CASE("RefusalReport gives refusals from thousands of addresses one line per interval") {
  RefusalReport r(seconds(10), 4096);
  size_t immediate = 0;
  // 5,000 addresses (as many nodes), two refused more often than the others.
  for (int i = 0; i < 5000; ++i) {
    const std::string address = "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    for (int k = 0; k < (i == 7 ? 9 : i == 8 ? 5 : 1); ++k) {
      immediate += r.Record(address, "x", kT0 + milliseconds(i)).has_value() ? 1 : 0;
    }
  }
  CHECK(immediate == 1);
  auto lines = r.Flush(kT0 + seconds(10));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "refused 5012 unauthenticated connections from at least 4096 addresses (5012 in total) in "
        "the last 10.0 s, most from 10.0.0.7 (9), 10.0.0.8 (5), 10.0.0.0 (1); latest: x");
}

TEST_CASE("RefusalReport names the addresses with the most refusals") {
  RefusalReport r(seconds(10), 32);
  r.Record("a", "x", kT0);
  for (int i = 0; i < 3; ++i) r.Record("c", "x", kT0);
  for (int i = 0; i < 2; ++i) r.Record("b", "x", kT0);
  r.Record("d", "z", kT0);
  auto lines = r.Flush(kT0 + seconds(10));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "refused 7 unauthenticated connections from 4 addresses (7 in total) in the last 10.0 s, "
        "most from c (3), b (2), a (1); latest: z");
}

TEST_CASE("RefusalReport flushes early when told it is the final flush") {
  RefusalReport r(seconds(10), 32);
  r.Record("a", "x", kT0);
  r.Record("a", "x", kT0 + milliseconds(100));
  r.Record("a", "x", kT0 + milliseconds(200));
  auto lines = r.Flush(kT0 + milliseconds(300), /*final=*/true);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "refused 3 unauthenticated connections from a (3 in total) in the last 0.3 s; latest: x");
  CHECK(RefusalReport().Flush(kT0, true).empty());
}

}  // namespace
}  // namespace dslaunch
