// The straggler rule: a rank's median step time over its window against the median of its peers',
// above the factor and the margin, for `patience` checks in a row (and back for as many to clear).
#include "launcher/status/straggler_detector.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

// Feeds `rounds` rounds of one sample per rank (times[rank]), steps numbered on from `*step`;
// returns the changes, in order.
std::vector<StragglerChange> Feed(StragglerDetector& d, const std::vector<double>& times, int rounds, int64_t* step) {
  std::vector<StragglerChange> changes;
  for (int s = 0; s < rounds; ++s) {
    ++*step;
    for (size_t rank = 0; rank < times.size(); ++rank) {
      if (auto c = d.AddStepTime(static_cast<int>(rank), *step, times[rank])) changes.push_back(*c);
    }
  }
  return changes;
}

std::vector<StragglerChange> Feed(StragglerDetector& d, const std::vector<double>& times, int rounds) {
  int64_t step = 0;
  return Feed(d, times, rounds, &step);
}

constexpr auto kFlagged = StragglerChange::Kind::kFlagged;
constexpr auto kCleared = StragglerChange::Kind::kCleared;

TEST_CASE("A rank slower than its peers' median by the factor and the margin is flagged after `patience` checks") {
  StragglerDetector d(StragglerOptions{1.5, 20, 20, 5});
  int64_t step = 0;
  // 19 rounds: no rank has a full window yet; then 4 checks find rank 3 slow: not yet.
  CHECK(Feed(d, {198, 201, 199, 412, 200, 197}, 23, &step).empty());
  CHECK_FALSE(d.flagged(3));
  const auto flagged = Feed(d, {198, 201, 199, 412, 200, 197}, 1, &step);
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0] == StragglerChange{kFlagged, Straggler{3, "", 412, 199, 20, 24}});  // peers: 197..201
  CHECK(d.flagged(3));
  CHECK(d.Flagged(3) == Straggler{3, "", 412, 199, 20, 24});
  CHECK_FALSE(d.Flagged(2));
  // Not flagged twice while it stays slow.
  CHECK(Feed(d, {198, 201, 199, 412, 200, 197}, 100, &step).empty());
}

TEST_CASE("A gap below the margin is no straggler, whatever the factor: 2045 ms against 2048, 3 ms against 1.5") {
  StragglerDetector d(StragglerOptions{1.5, 3, 20, 1});
  CHECK(Feed(d, {2045, 2048}, 50).empty());
  StragglerDetector fast(StragglerOptions{1.5, 3, 20, 1});
  CHECK(Feed(fast, {1.5, 3.0}, 50).empty());  // twice as slow, 1.5 ms behind
  StragglerDetector edge(StragglerOptions{1.5, 3, 20, 1});
  CHECK(Feed(edge, {20, 40}, 50).empty());  // exactly the margin is not above it
  StragglerDetector above(StragglerOptions{1.5, 3, 20, 1});
  CHECK(Feed(above, {20, 40.5}, 3).size() == 1);
  // With margin 0 the factor alone decides.
  StragglerDetector no_margin(StragglerOptions{1.5, 3, 0, 1});
  CHECK(Feed(no_margin, {1.5, 3.0}, 3).size() == 1);
}

TEST_CASE("The median ignores a few slow steps; a factor not exceeded is no straggler") {
  StragglerDetector d(StragglerOptions{1.5, 20, 20, 1});
  // Rank 1: 9 slow steps out of 20 (a checkpoint, validations): its median stays fast.
  std::vector<StragglerChange> changes;
  for (int s = 0; s < 20; ++s) {
    if (auto c = d.AddStepTime(0, s + 1, 100)) changes.push_back(*c);
    if (auto c = d.AddStepTime(1, s + 1, s < 9 ? 1000 : 100)) changes.push_back(*c);
    if (auto c = d.AddStepTime(2, s + 1, 100)) changes.push_back(*c);
  }
  CHECK(changes.empty());
  // Exactly 1.5 times slower is not more than the factor.
  StragglerDetector exact(StragglerOptions{1.5, 5, 20, 1});
  int64_t step = 0;
  CHECK(Feed(exact, {100, 150, 100}, 10, &step).empty());
  CHECK(Feed(exact, {100, 151, 100}, 10, &step).size() == 1);  // the window turns slower
}

TEST_CASE("The median of an even number of values is the mean of the two middle ones") {
  // Window 4: rank 0's steps 100, 100, 300, 300 have median 200, not 100 or 300.
  // Peers 1..4 have medians 100, 110, 130, 140: their median is 120, not 110 or 130.
  StragglerDetector d(StragglerOptions{1.6, 4, 0, 1});
  const std::vector<double> peers = {100, 110, 130, 140};
  int64_t step = 0;
  for (double t : {100.0, 100.0, 300.0}) {
    ++step;
    CHECK_FALSE(d.AddStepTime(0, step, t));
    for (size_t p = 0; p < peers.size(); ++p) CHECK_FALSE(d.AddStepTime(static_cast<int>(p) + 1, step, peers[p]));
  }
  ++step;
  for (size_t p = 0; p < peers.size(); ++p) CHECK_FALSE(d.AddStepTime(static_cast<int>(p) + 1, step, peers[p]));
  const auto c = d.AddStepTime(0, step, 300);
  REQUIRE(c);  // 200 > 1.6 x 120 = 192 (with the upper middle ones: 300 and 130)
  CHECK(c->straggler == Straggler{0, "", 200, 120, 4, 4});
}

TEST_CASE("Patience: a slow spell shorter than `patience` checks flags nothing; a recovery clears after as many") {
  StragglerDetector d(StragglerOptions{1.5, 1, 20, 3});
  int64_t step = 0;
  CHECK(Feed(d, {100, 100}, 1, &step).empty());
  CHECK(Feed(d, {100, 300}, 2, &step).empty());  // two slow checks
  CHECK(Feed(d, {100, 100}, 1, &step).empty());  // the streak is broken
  CHECK(Feed(d, {100, 300}, 2, &step).empty());
  const auto flagged = Feed(d, {100, 300}, 1, &step);  // the third in a row
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0] == StragglerChange{kFlagged, Straggler{1, "", 300, 100, 1, 7}});
  // Two good checks, one slow, then three good: cleared at the third good one in a row.
  CHECK(Feed(d, {100, 100}, 2, &step).empty());
  CHECK(Feed(d, {100, 300}, 1, &step).empty());
  CHECK(d.flagged(1));
  CHECK(Feed(d, {100, 100}, 2, &step).empty());
  const auto cleared = Feed(d, {100, 100}, 1, &step);
  REQUIRE(cleared.size() == 1);
  CHECK(cleared[0] == StragglerChange{kCleared, Straggler{1, "", 100, 100, 1, 7}});  // since: the flag's step
  CHECK_FALSE(d.flagged(1));
  CHECK_FALSE(d.Flagged(1));
  // Slow again: flagged again, since its new step.
  const auto again = Feed(d, {100, 300}, 3, &step);
  REQUIRE(again.size() == 1);
  CHECK(again[0].straggler.since_step == 16);
}

TEST_CASE("Peers are the other ranks with a full window: a world of 1 never, of 2 the slower rank") {
  StragglerDetector one(StragglerOptions{1.5, 3, 20, 1});
  CHECK(Feed(one, {500}, 10).empty());

  StragglerDetector two(StragglerOptions{1.5, 3, 20, 1});
  const auto flagged = Feed(two, {100, 300}, 3);
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0].straggler.rank == 1);
  CHECK(flagged[0].straggler.peers_median_ms == 100);

  // The slow rank fills its window first: no peer yet, no check; it is judged at its next sample.
  StragglerDetector early(StragglerOptions{1.5, 3, 20, 1});
  for (int i = 0; i < 3; ++i) CHECK_FALSE(early.AddStepTime(1, i + 1, 300));
  for (int i = 0; i < 3; ++i) CHECK_FALSE(early.AddStepTime(0, i + 1, 100));
  CHECK(early.AddStepTime(1, 4, 300).has_value());
}

TEST_CASE("Reset forgets windows and flags; factor 0 turns detection off") {
  StragglerDetector d(StragglerOptions{2.0, 2, 20, 1});
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
  CHECK(ValidateStragglerOptions({1.5, 1, 0, 1}).ok());
  CHECK(ValidateStragglerOptions({1.0, 20}).message() ==
        "--straggler_factor 1 must be above 1 (a rank that many times slower than its peers is flagged), or 0 to "
        "turn straggler detection off");
  CHECK(ValidateStragglerOptions({-2, 20}).code() == StatusCode::kInvalidArgument);
  CHECK(ValidateStragglerOptions({1.5, 0}).message() == "--straggler_window 0 must be 1..10000 steps");
  CHECK(ValidateStragglerOptions({1.5, 10001}).message() == "--straggler_window 10001 must be 1..10000 steps");
  CHECK(ValidateStragglerOptions({1.5, 20, -1}).message() ==
        "--straggler_margin_ms -1 must be 0 or more (milliseconds per step a straggler is behind its peers' median "
        "at least)");
  CHECK(ValidateStragglerOptions({1.5, 20, 20, 0}).message() == "--straggler_patience 0 must be 1..10000 checks in a row");
  CHECK(ValidateStragglerOptions({1.5, 20, 20, 10001}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("DescribeStraggler says who, where, since when, how slow, against what, and the rule") {
  const StragglerOptions rule{1.5, 20, 20, 5};
  CHECK(DescribeStraggler({5, "host-2", 412.4, 198.0, 20, 40}, rule) ==
        "rank 5 on host-2 is a straggler since step 40: 412 ms/step against a median of 198 ms over 20 steps (2.1x; "
        "the rule: above 1.5x and 20 ms more, 5 checks in a row)");
  CHECK(DescribeStraggler({1, "", 4.25, 1.5, 3, 7}, StragglerOptions{2, 3, 0.5, 1}) ==
        "rank 1 is a straggler since step 7: 4.2 ms/step against a median of 1.5 ms over 3 steps (2.8x; the rule: "
        "above 2x and 0.5 ms more, 1 check in a row)");
  CHECK(DescribeStragglerCleared({5, "host-2", 201, 198.0, 20, 40}, 90) ==
        "rank 5 on host-2 is no longer a straggler at step 90: 201 ms/step against a median of 198 ms over 20 steps");
}

}  // namespace
}  // namespace dslaunch::launcher
