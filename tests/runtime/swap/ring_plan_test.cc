#include "runtime/swap/ring_plan.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

namespace dslaunch::runtime::swap {
namespace {

// Replays a plan against a model of the buffers and checks every rule of the ring: a buffer holds
// one sub-group at a time, is read into only when free, processed only after its read completed,
// written only after processing, and reused only after its write completed; every sub-group is
// read (when reading), processed and written (when writing) once, in order; nothing is left in
// flight at the end. Returns "" or the first broken rule.
std::string Replay(const std::vector<RingAction>& plan, size_t groups, size_t buffers, RingMode mode) {
  enum class State { kFree, kReading, kRead, kProcessed, kWriting };
  std::vector<State> state(buffers, State::kFree);
  std::vector<size_t> holder(buffers, 0);
  size_t processed = 0, written = 0, read = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const RingAction& a = plan[i];
    std::string where = "action " + std::to_string(i) + " " + ToString(a) + ": ";
    if (a.buffer != a.group % buffers) return where + "wrong buffer";
    State& s = state[a.buffer];
    bool holds = holder[a.buffer] == a.group;
    switch (a.step) {
      case RingStep::kStartRead:
        if (!mode.read) return where + "read in a mode that does not read";
        if (s != State::kFree) return where + "buffer not free";
        if (a.group != read++) return where + "reads out of order";
        s = State::kReading;
        holder[a.buffer] = a.group;
        break;
      case RingStep::kWaitRead:
        if (s != State::kReading || !holds) return where + "no read in flight";
        s = State::kRead;
        break;
      case RingStep::kProcess:
        if (a.group != processed++) return where + "processed out of order";
        if (mode.read && (s != State::kRead || !holds)) return where + "processed before its read completed";
        if (!mode.read && s != State::kFree) return where + "buffer not free";
        s = State::kProcessed;
        holder[a.buffer] = a.group;
        if (!mode.write) s = State::kFree;
        break;
      case RingStep::kStartWrite:
        if (!mode.write) return where + "write in a mode that does not write";
        if (s != State::kProcessed || !holds) return where + "written before processing";
        if (a.group != written++) return where + "writes out of order";
        s = State::kWriting;
        break;
      case RingStep::kWaitWrite:
        if (s != State::kWriting || !holds) return where + "no write in flight";
        s = State::kFree;
        break;
    }
  }
  if (processed != groups) return "processed " + std::to_string(processed) + " of " + std::to_string(groups);
  if (mode.write && written != groups) return "wrote " + std::to_string(written);
  if (mode.read && read != groups) return "read " + std::to_string(read);
  for (size_t b = 0; b < buffers; ++b) {
    if (state[b] != State::kFree) return "buffer " + std::to_string(b) + " busy at the end";
  }
  return "";
}

TEST_CASE("Every plan keeps the ring's rules for any count of sub-groups, buffers and mode") {
  for (RingMode mode : {RingMode{true, true}, RingMode{true, false}, RingMode{false, true}}) {
    for (size_t buffers = 1; buffers <= 6; ++buffers) {
      for (size_t groups = 0; groups <= 13; ++groups) {
        CAPTURE(mode.read);
        CAPTURE(mode.write);
        CAPTURE(buffers);
        CAPTURE(groups);
        CHECK(Replay(PlanRing(groups, buffers, mode), groups, buffers, mode) == "");
      }
    }
  }
}

// The transfers in flight (started, not yet waited) when sub-group `group` is processed.
std::set<std::string> InFlightAtProcess(const std::vector<RingAction>& plan, size_t group) {
  std::set<std::string> in_flight;
  for (const RingAction& a : plan) {
    if (a.step == RingStep::kProcess && a.group == group) return in_flight;
    std::string key = std::to_string(a.group);
    if (a.step == RingStep::kStartRead) in_flight.insert("read " + key);
    if (a.step == RingStep::kWaitRead) in_flight.erase("read " + key);
    if (a.step == RingStep::kStartWrite) in_flight.insert("write " + key);
    if (a.step == RingStep::kWaitWrite) in_flight.erase("write " + key);
  }
  FAIL("sub-group " << group << " is never processed");
  return in_flight;
}

TEST_CASE("With 3 buffers sub-group i is updated while i+1 is read and i-1 written back") {
  auto plan = PlanRing(8, 3, {true, true});
  for (size_t i = 1; i + 1 < 8; ++i) {
    CAPTURE(i);
    CHECK(InFlightAtProcess(plan, i) ==
          std::set<std::string>{"read " + std::to_string(i + 1), "write " + std::to_string(i - 1)});
  }
  CHECK(InFlightAtProcess(plan, 0) == std::set<std::string>{"read 1"});
  // No read left to free a buffer for: the last writes stay in flight until the end.
  CHECK(InFlightAtProcess(plan, 7) == std::set<std::string>{"write 5", "write 6"});
}

TEST_CASE("More buffers read further ahead; fewer give up overlap, never correctness") {
  CHECK(InFlightAtProcess(PlanRing(10, 5, {true, true}), 4) ==
        std::set<std::string>{"read 5", "read 6", "read 7", "write 3"});
  CHECK(InFlightAtProcess(PlanRing(10, 2, {true, true}), 4) == std::set<std::string>{"read 5"});
  CHECK(InFlightAtProcess(PlanRing(10, 1, {true, true}), 4).empty());
  CHECK(InFlightAtProcess(PlanRing(10, 3, {true, false}), 4) == std::set<std::string>{"read 5", "read 6"});
  CHECK(InFlightAtProcess(PlanRing(10, 3, {false, true}), 4) == std::set<std::string>{"write 2", "write 3"});
  CHECK(ReadAhead(1, {true, true}) == 0);
  CHECK(ReadAhead(2, {true, true}) == 1);
  CHECK(ReadAhead(4, {true, true}) == 2);
  CHECK(ReadAhead(4, {true, false}) == 3);
}

TEST_CASE("The plan for 3 sub-groups through 2 buffers, spelled out") {
  std::vector<std::string> got;
  for (const auto& a : PlanRing(3, 2, {true, true})) got.push_back(ToString(a));
  CHECK(got == std::vector<std::string>{
                   "StartRead(g=0,b=0)", "StartRead(g=1,b=1)", "WaitRead(g=0,b=0)", "Process(g=0,b=0)",
                   "StartWrite(g=0,b=0)", "WaitWrite(g=0,b=0)", "StartRead(g=2,b=0)", "WaitRead(g=1,b=1)",
                   "Process(g=1,b=1)", "StartWrite(g=1,b=1)", "WaitRead(g=2,b=0)", "Process(g=2,b=0)",
                   "StartWrite(g=2,b=0)", "WaitWrite(g=1,b=1)", "WaitWrite(g=2,b=0)"});
}

}  // namespace
}  // namespace dslaunch::runtime::swap
