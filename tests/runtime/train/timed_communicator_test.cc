#include "runtime/train/timed_communicator.h"

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

using std::chrono::milliseconds;

TEST_CASE("TimedCommunicator passes collectives and their results through") {
  testing::ThreadCommunicatorGroup group(2);
  std::vector<std::future<std::vector<float>>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      TimedCommunicator comm(group.Get(r));
      CHECK(comm.rank() == r);
      CHECK(comm.world_size() == 2);
      CHECK(comm.Describe() == group.Get(r).Describe());
      std::vector<float> sum = {1.0f + r, 10.0f};
      REQUIRE(comm.AllReduce(sum, ReduceOp::kAvg).ok());
      const float mine = 5.0f + r;
      std::vector<float> all(2);
      REQUIRE(comm.AllGather(std::span<const float>(&mine, 1), all, {1, 1}).ok());
      std::vector<float> root = {r == 1 ? 7.0f : 0.0f};
      REQUIRE(comm.Broadcast(root, 1).ok());
      REQUIRE(comm.Barrier().ok());
      std::vector<float> part(1);
      REQUIRE(comm.ReduceScatter(std::vector<float>{1, 2}, part, {1, 1}, ReduceOp::kSum).ok());
      return std::vector<float>{sum[0], sum[1], all[0], all[1], root[0], part[0]};
    }));
  }
  CHECK(ranks[0].get() == std::vector<float>{1.5f, 10.0f, 5.0f, 6.0f, 7.0f, 2.0f});
  CHECK(ranks[1].get() == std::vector<float>{1.5f, 10.0f, 5.0f, 6.0f, 7.0f, 4.0f});
}

TEST_CASE("TimedCommunicator counts the time a rank waits inside a collective for a late peer") {
  constexpr milliseconds kLate{30};
  testing::ThreadCommunicatorGroup group(2);
  TimedCommunicator early(group.Get(0));
  auto waiting = std::async(std::launch::async, [&] { return early.Barrier(); });
  // Rank 0 is inside the barrier before rank 1 starts being late: it waits at least kLate.
  REQUIRE(group.WaitUntilEntered(0, milliseconds(5000)));
  std::this_thread::sleep_for(kLate);
  TimedCommunicator late(group.Get(1));
  REQUIRE(late.Barrier().ok());
  REQUIRE(waiting.get().ok());
  CHECK(early.in_collectives() >= kLate);
}

TEST_CASE("TimedCommunicator reports a failed collective and is unusable after it") {
  testing::ThreadCommunicatorGroup group(2, milliseconds(50));
  TimedCommunicator comm(group.Get(0));
  group.Kill(1);
  const Status failed = comm.Barrier();
  CHECK(failed.code() == StatusCode::kAborted);
  CHECK(comm.Barrier().code() == StatusCode::kAborted);
  CHECK_FALSE(comm.health().ok());
}

}  // namespace
}  // namespace dslaunch::runtime
