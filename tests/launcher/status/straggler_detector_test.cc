// The straggler rule: a rank's median step time over its window against the median of its peers'.
#include "launcher/status/straggler_detector.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

// Feeds `steps` rounds of one sample per rank (times[rank]); returns the flags, in order.
std::vector<Straggler> Feed(StragglerDetector& d, const std::vector<double>& times, int steps) {
  std::vector<Straggler> flagged;
  for (int s = 0; s < steps; ++s) {
    for (size_t rank = 0; rank < times.size(); ++rank) {
      if (auto f = d.AddStepTime(static_cast<int>(rank), times[rank])) flagged.push_back(*f);
    }
  }
  return flagged;
}

TEST_CASE("A rank slower than its peers' median by more than the factor is flagged once its window is full") {
  StragglerDetector d(StragglerOptions{1.5, 20});
  // 19 rounds: no rank has a full window yet.
  CHECK(Feed(d, {198, 201, 199, 412, 200, 197}, 19).empty());
  const auto flagged = Feed(d, {198, 201, 199, 412, 200, 197}, 1);
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0].rank == 3);
  CHECK(flagged[0].median_ms == 412);
  CHECK(flagged[0].peers_median_ms == 199);  // of 197, 198, 199, 200, 201
  CHECK(flagged[0].window == 20);
  CHECK(d.flagged(3));
  // Not flagged twice, however long it stays slow.
  CHECK(Feed(d, {198, 201, 199, 412, 200, 197}, 100).empty());
}

TEST_CASE("The median ignores a few slow steps; a factor not exceeded is no straggler") {
  StragglerDetector d(StragglerOptions{1.5, 20});
  // Rank 1: 9 slow steps out of 20 (a checkpoint, validations): its median stays fast.
  std::vector<Straggler> flagged;
  for (int s = 0; s < 20; ++s) {
    if (auto f = d.AddStepTime(0, 100)) flagged.push_back(*f);
    if (auto f = d.AddStepTime(1, s < 9 ? 1000 : 100)) flagged.push_back(*f);
    if (auto f = d.AddStepTime(2, 100)) flagged.push_back(*f);
  }
  CHECK(flagged.empty());
  // Exactly 1.5 times slower is not more than the factor.
  StragglerDetector exact(StragglerOptions{1.5, 5});
  CHECK(Feed(exact, {100, 150, 100}, 10).empty());
  CHECK(Feed(exact, {100, 151, 100}, 10).size() == 1);  // the window turns slower
}

TEST_CASE("Peers are the other ranks with a full window: a world of 1 never, of 2 the slower rank") {
  StragglerDetector one(StragglerOptions{1.5, 3});
  CHECK(Feed(one, {500}, 10).empty());

  StragglerDetector two(StragglerOptions{1.5, 3});
  const auto flagged = Feed(two, {100, 300}, 3);
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0].rank == 1);
  CHECK(flagged[0].peers_median_ms == 100);

  // The slow rank fills its window first: no peer yet, no verdict; it is judged at its next sample.
  StragglerDetector early(StragglerOptions{1.5, 3});
  for (int i = 0; i < 3; ++i) CHECK_FALSE(early.AddStepTime(1, 300));
  for (int i = 0; i < 3; ++i) CHECK_FALSE(early.AddStepTime(0, 100));
  CHECK(early.AddStepTime(1, 300).has_value());
}

TEST_CASE("Reset forgets windows and flags; factor 0 turns detection off") {
  StragglerDetector d(StragglerOptions{2.0, 2});
  CHECK(Feed(d, {10, 10, 50}, 2).size() == 1);
  d.Reset();
  CHECK_FALSE(d.flagged(2));
  CHECK(Feed(d, {10, 10, 50}, 1).empty());  // the windows start afresh
  CHECK(Feed(d, {10, 10, 50}, 1).size() == 1);

  StragglerDetector off(StragglerOptions{0, 2});
  CHECK_FALSE(off.enabled());
  CHECK(Feed(off, {10, 10, 50}, 10).empty());
}

TEST_CASE("ValidateStragglerOptions names the option and the range") {
  CHECK(ValidateStragglerOptions({}).ok());
  CHECK(ValidateStragglerOptions({0, 20}).ok());
  CHECK(ValidateStragglerOptions({1.5, 1}).message().empty());
  CHECK(ValidateStragglerOptions({1.0, 20}).message() ==
        "--straggler_factor 1 must be above 1 (a rank that many times slower than its peers is flagged), or 0 to "
        "turn straggler detection off");
  CHECK(ValidateStragglerOptions({-2, 20}).code() == StatusCode::kInvalidArgument);
  CHECK(ValidateStragglerOptions({1.5, 0}).message() == "--straggler_window 0 must be 1..10000 steps");
  CHECK(ValidateStragglerOptions({1.5, 10001}).message() == "--straggler_window 10001 must be 1..10000 steps");
}

TEST_CASE("DescribeStraggler says who, where, how slow, against what, over how many steps") {
  CHECK(DescribeStraggler({5, "host-2", 412.4, 198.0, 20}) ==
        "rank 5 on host-2 is a straggler: 412 ms/step against a median of 198 ms over 20 steps");
  CHECK(DescribeStraggler({1, "", 4.25, 1.5, 3}) ==
        "rank 1 is a straggler: 4.2 ms/step against a median of 1.5 ms over 3 steps");
}

}  // namespace
}  // namespace dslaunch::launcher
