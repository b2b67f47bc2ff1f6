// When the training loop saves (runtime/train/checkpoint_schedule.h): periodic, final on stop and
// at the end, asynchronous or not, and with checkpointing off.
#include "runtime/train/checkpoint_schedule.h"

#include <doctest/doctest.h>

#include <vector>

namespace dslaunch::runtime {
namespace {

CheckpointConfig Checkpoints(int64_t interval, bool async = false, bool save_on_stop = true) {
  CheckpointConfig c;
  c.dir = "/tmp/ckpt";
  c.interval = interval;
  c.async = async;
  c.save_on_stop = save_on_stop;
  return c;
}

std::vector<int64_t> PeriodicSteps(const CheckpointSchedule& schedule, int64_t total) {
  std::vector<int64_t> steps;
  for (int64_t step = 1; step <= total; ++step) {
    if (schedule.AfterStep(step, /*stop=*/false).kind == SaveKind::kPeriodic) steps.push_back(step);
  }
  return steps;
}

TEST_CASE("Periodic saves fall on multiples of the interval, the last step left to the final save") {
  struct Case {
    int64_t interval, total;
    std::vector<int64_t> periodic;
  };
  for (const Case& c : {Case{4, 10, {4, 8}}, Case{5, 10, {5}}, Case{1, 3, {1, 2}}, Case{20, 10, {}},
                        Case{0, 10, {}}}) {
    CAPTURE(c.interval);
    CAPTURE(c.total);
    const CheckpointSchedule schedule(Checkpoints(c.interval), c.total);
    CHECK(PeriodicSteps(schedule, c.total) == c.periodic);
    CHECK(schedule.AfterStep(c.total, false).kind == SaveKind::kNone);
  }
}

TEST_CASE("A periodic save is asynchronous exactly when checkpoint.async is set") {
  CHECK_FALSE(CheckpointSchedule(Checkpoints(2, /*async=*/false), 10).AfterStep(4, false).async);
  CHECK(CheckpointSchedule(Checkpoints(2, /*async=*/true), 10).AfterStep(4, false).async);
}

TEST_CASE("The end of training is a final save that saves") {
  const SaveDecision end = CheckpointSchedule(Checkpoints(4), 10).AtEnd();
  CHECK(end.kind == SaveKind::kFinal);
  CHECK(end.why == "end");
  CHECK(end.save);
}

TEST_CASE("A stop is a final save, saving with save_on_stop or when the step is due anyway") {
  struct Case {
    bool save_on_stop;
    int64_t step;
    bool save;
  };
  for (const Case& c : {Case{true, 3, true}, Case{true, 4, true}, Case{false, 3, false}, Case{false, 4, true},
                        Case{false, 10, false}, Case{true, 10, true}}) {
    CAPTURE(c.save_on_stop);
    CAPTURE(c.step);
    const SaveDecision stop = CheckpointSchedule(Checkpoints(4, false, c.save_on_stop), 10).AfterStep(c.step, true);
    CHECK(stop.kind == SaveKind::kFinal);  // a stop ends the run, even at a periodic step
    CHECK(stop.why == "stop");
    CHECK(stop.save == c.save);
  }
}

TEST_CASE("With checkpointing off nothing saves, but a stop still ends the run") {
  CheckpointConfig off = Checkpoints(2);
  off.dir.clear();
  const CheckpointSchedule schedule(off, 10);
  CHECK_FALSE(schedule.enabled());
  CHECK(PeriodicSteps(schedule, 10).empty());
  CHECK_FALSE(schedule.IntervalDue(4));
  CHECK_FALSE(schedule.AtEnd().save);
  const SaveDecision stop = schedule.AfterStep(3, true);
  CHECK(stop.kind == SaveKind::kFinal);
  CHECK_FALSE(stop.save);
}

TEST_CASE("The asynchronous save in flight completes only once every rank has written its shard") {
  CHECK(CheckpointSchedule::CompletePendingNow(true, 3, 3));
  CHECK_FALSE(CheckpointSchedule::CompletePendingNow(true, 2, 3));
  CHECK_FALSE(CheckpointSchedule::CompletePendingNow(false, 3, 3));
}

TEST_CASE("In-memory snapshots: every step by default where a restart can read them, else as configured") {
  // Left out: every step with agent memory, a restart budget and the state in memory.
  CHECK(ResolveSnapshotInterval(kSnapshotIntervalAuto, true, 1, false) == 1);
  CHECK(ResolveSnapshotInterval(kSnapshotIntervalAuto, true, 0, false) == 0);  // no restart would read them
  CHECK(ResolveSnapshotInterval(kSnapshotIntervalAuto, true, 3, true) == 0);   // the state is on NVMe
  CHECK(ResolveSnapshotInterval(kSnapshotIntervalAuto, false, 3, false) == 0);  // no agent holds memory
  // Configured: as given, where there is memory to write into.
  CHECK(ResolveSnapshotInterval(5, true, 0, true) == 5);
  CHECK(ResolveSnapshotInterval(0, true, 3, false) == 0);
  CHECK(ResolveSnapshotInterval(5, false, 3, false) == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
