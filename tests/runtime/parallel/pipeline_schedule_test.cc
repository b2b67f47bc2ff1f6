#include "runtime/parallel/pipeline_schedule.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace dslaunch::runtime {
namespace {

// The forwards and backwards only ("F0 F1 B0 ..."): the tables below are worked by hand.
std::string Compute(const std::vector<PipeInstruction>& instructions) {
  std::vector<PipeInstruction> compute;
  for (const PipeInstruction& i : instructions) {
    if (i.op == PipeOp::kForward || i.op == PipeOp::kBackward) compute.push_back(i);
  }
  return FormatSchedule(compute);
}

TEST_CASE("1F1B on 2 stages and 4 micro-batches, sends and receives included, as worked by hand") {
  CHECK(FormatSchedule(StageSchedule(PipeSchedule::k1F1B, 2, 0, 4)) ==
        "F0 sA0 F1 sA1 rG0 B0 F2 sA2 rG1 B1 F3 sA3 rG2 B2 rG3 B3");
  CHECK(FormatSchedule(StageSchedule(PipeSchedule::k1F1B, 2, 1, 4)) ==
        "rA0 F0 B0 sG0 rA1 F1 B1 sG1 rA2 F2 B2 sG2 rA3 F3 B3 sG3");
}

TEST_CASE("GPipe on 2 stages and 4 micro-batches: all forwards, then the backwards in micro-batch order") {
  CHECK(FormatSchedule(StageSchedule(PipeSchedule::kGPipe, 2, 0, 4)) ==
        "F0 sA0 F1 sA1 F2 sA2 F3 sA3 rG0 B0 rG1 B1 rG2 B2 rG3 B3");
  CHECK(FormatSchedule(StageSchedule(PipeSchedule::kGPipe, 2, 1, 4)) ==
        "rA0 F0 rA1 F1 rA2 F2 rA3 F3 B0 sG0 B1 sG1 B2 sG2 B3 sG3");
}

TEST_CASE("1F1B on 4 stages: p - s - 1 forwards first, then one forward one backward, then the rest") {
  const char* m4[] = {"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 B0 F3 B1 B2 B3", "F0 F1 B0 F2 B1 F3 B2 B3",
                      "F0 B0 F1 B1 F2 B2 F3 B3"};
  const char* m8[] = {"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"};
  for (int s = 0; s < 4; ++s) {
    CAPTURE(s);
    CHECK(Compute(StageSchedule(PipeSchedule::k1F1B, 4, s, 4)) == m4[s]);
    CHECK(Compute(StageSchedule(PipeSchedule::k1F1B, 4, s, 8)) == m8[s]);
    // Held at once: p - s micro-batches (capped at m) under 1F1B, all m under GPipe.
    CHECK(PeakMicroBatchesHeld(StageSchedule(PipeSchedule::k1F1B, 4, s, 8)) == 4 - s);
    CHECK(PeakMicroBatchesHeld(StageSchedule(PipeSchedule::kGPipe, 4, s, 8)) == 8);
    for (int m : {1, 2, 3, 8}) {  // the formula is the lists' count
      for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
        CHECK(MicroBatchesHeld(schedule, 4, s, m) == PeakMicroBatchesHeld(StageSchedule(schedule, 4, s, m)));
      }
    }
  }
  // Fewer micro-batches than stages: the warm-up is cut at m.
  CHECK(Compute(StageSchedule(PipeSchedule::k1F1B, 4, 0, 2)) == "F0 F1 B0 B1");
  CHECK(Compute(StageSchedule(PipeSchedule::kGPipe, 4, 0, 4)) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(FormatSchedule(StageSchedule(PipeSchedule::k1F1B, 1, 0, 2)) == "F0 B0 F1 B1");
}

// Runs every stage's list with buffered sends: a message is there for its receiver from the time
// the sender posts it; a receive waits for it. Forwards take `f`, backwards `b`, messages nothing.
// Returns each stage's finishing time and busy time, or fails the test on a deadlock or on a
// message received that is not the one sent next on that link.
struct Run {
  std::vector<double> finish, busy;
};
Run Simulate(PipeSchedule schedule, int p, int m, double f, double b) {
  std::vector<std::vector<PipeInstruction>> lists(p);
  for (int s = 0; s < p; ++s) lists[s] = StageSchedule(schedule, p, s, m);
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0), busy(p, 0);
  // Per directed link (from, to): the queue of (micro-batch, time it was sent).
  std::map<std::pair<int, int>, std::vector<std::pair<int, double>>> links;
  std::map<std::pair<int, int>, size_t> taken;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < lists[s].size()) {
        const PipeInstruction& in = lists[s][next[s]];
        if (in.op == PipeOp::kForward || in.op == PipeOp::kBackward) {
          const double t = in.op == PipeOp::kForward ? f : b;
          clock[s] += t;
          busy[s] += t;
        } else if (in.op == PipeOp::kSendActivation || in.op == PipeOp::kSendGradient) {
          const int to = in.op == PipeOp::kSendActivation ? s + 1 : s - 1;
          REQUIRE((to >= 0 && to < p));
          links[{s, to}].push_back({in.micro_batch, clock[s]});
        } else {
          const int from = in.op == PipeOp::kRecvActivation ? s - 1 : s + 1;
          REQUIRE((from >= 0 && from < p));
          auto& queue = links[{from, s}];
          size_t& k = taken[{from, s}];
          if (k == queue.size()) break;  // not sent yet: wait
          CHECK(queue[k].first == in.micro_batch);  // links deliver in order
          clock[s] = std::max(clock[s], queue[k].second);
          ++k;
        }
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    CAPTURE(s);
    REQUIRE_MESSAGE(next[s] == lists[s].size(), "deadlock: stage " << s << " stuck at " << next[s]);
  }
  for (auto& [link, queue] : links) CHECK(taken[link] == queue.size());  // nothing left unread
  return Run{clock, busy};
}

TEST_CASE("Both schedules run without deadlock, and each stage idles (p - 1) / (m + p - 1) of the step") {
  for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, 2, 4, 8, 16}) {
        for (double b : {1.0, 2.0}) {  // a backward as long as a forward, and twice as long
          CAPTURE(PipeScheduleName(schedule));
          CAPTURE(p);
          CAPTURE(m);
          CAPTURE(b);
          const Run run = Simulate(schedule, p, m, 1.0, b);
          const double makespan = *std::max_element(run.finish.begin(), run.finish.end());
          CHECK(makespan == doctest::Approx((m + p - 1) * (1.0 + b)));
          for (int s = 0; s < p; ++s) {
            CHECK(run.busy[s] == doctest::Approx(m * (1.0 + b)));
            CHECK(1.0 - run.busy[s] / makespan == doctest::Approx(BubbleFraction(p, m)));
          }
        }
      }
    }
  }
  CHECK(BubbleFraction(4, 8) == doctest::Approx(3.0 / 11.0));
  CHECK(BubbleFraction(1, 8) == 0.0);
}

TEST_CASE("Pipeline schedule names are read as DeepSpeed users write them") {
  CHECK(*ParsePipeSchedule("1F1B") == PipeSchedule::k1F1B);
  CHECK(*ParsePipeSchedule("gpipe") == PipeSchedule::kGPipe);
  auto bad = ParsePipeSchedule("interleaved");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("\"1f1b\"") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
