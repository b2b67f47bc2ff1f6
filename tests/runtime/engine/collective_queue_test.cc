// CollectiveQueue: jobs in submission order, on its thread or at once; WaitFor and Drain; the
// first failure kept and the jobs after it skipped; QueuedCommunicator waits for the queue before
// each collective of its own.
#include "runtime/engine/collective_queue.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/fakes/engine_on_threads.h"
#include "tests/fakes/recording_communicator.h"

namespace dslaunch::runtime {
namespace {

TEST_CASE("A queue runs its jobs in order, on its own thread when threaded and at once when not") {
  for (bool threaded : {false, true}) {
    CAPTURE(threaded);
    CollectiveQueue queue(threaded);
    CHECK(queue.threaded() == threaded);
    std::vector<int> order;
    std::vector<std::thread::id> ran_on;
    CollectiveQueue::Ticket last = 0;
    for (int i = 0; i < 20; ++i) {
      last = queue.Submit([&, i] {
        order.push_back(i);
        ran_on.push_back(std::this_thread::get_id());
        return Status::Ok();
      });
    }
    CHECK(last == 20);
    queue.WaitFor(last);
    std::vector<int> expected(20);
    for (int i = 0; i < 20; ++i) expected[static_cast<size_t>(i)] = i;
    CHECK(order == expected);
    for (std::thread::id id : ran_on) CHECK((id == std::this_thread::get_id()) == !threaded);
    CHECK(queue.Drain().ok());
  }
}

TEST_CASE("WaitFor returns once that job is done, while later jobs may still wait") {
  CollectiveQueue queue(true);
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  const CollectiveQueue::Ticket first = queue.Submit([&] {
    ++done;
    return Status::Ok();
  });
  queue.Submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++done;
    return Status::Ok();
  });
  queue.WaitFor(first);
  CHECK(done.load() >= 1);
  CHECK(done.load() < 2);  // the second job waits for `release`
  release = true;
  CHECK(queue.Drain().ok());
  CHECK(done.load() == 2);
}

TEST_CASE("The first failure is kept, the jobs after it are skipped, and Drain keeps returning it") {
  for (bool threaded : {false, true}) {
    CAPTURE(threaded);
    CollectiveQueue queue(threaded);
    int ran = 0;
    queue.Submit([&] {
      ++ran;
      return Status::Ok();
    });
    queue.Submit([&] {
      ++ran;
      return AbortedError("rank 1 died");
    });
    queue.Submit([&] {
      ++ran;
      return InternalError("never run");
    });
    const Status first = queue.Drain();
    CHECK(first.code() == StatusCode::kAborted);
    CHECK(first.ToString().find("rank 1 died") != std::string::npos);
    CHECK(ran == 2);
    CHECK(queue.Drain().ToString() == first.ToString());
  }
}

TEST_CASE("The destructor waits for every job queued") {
  std::atomic<int> done{0};
  {
    CollectiveQueue queue(true);
    for (int i = 0; i < 5; ++i) {
      queue.Submit([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++done;
        return Status::Ok();
      });
    }
  }
  CHECK(done.load() == 5);
}

TEST_CASE("QueuedCommunicator makes its collective after the queued ones, on every rank in the same order") {
  std::vector<std::string> calls;
  testing::OnEveryRankComm(2, [&](int rank, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    CollectiveQueue queue(true);
    QueuedCommunicator front(rec, queue);
    std::vector<float> input(4, static_cast<float>(rank + 1)), part(2);
    queue.Submit([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // still running when the front calls
      return rec.ReduceScatter(std::span<const float>(input), std::span<float>(part), {2, 2}, ReduceOp::kSum);
    });
    std::vector<float> one = {static_cast<float>(rank)};
    REQUIRE(front.AllReduce(std::span<float>(one), ReduceOp::kSum).ok());
    CHECK(one[0] == 1.0f);
    CHECK(part == std::vector<float>{3.0f, 3.0f});
    if (rank == 0) calls = rec.calls();
  });
  CHECK(calls == std::vector<std::string>{"reduce_scatter sum fp32 [2,2]", "all_reduce sum fp32 1"});
}

TEST_CASE("QueuedCommunicator fails with the queue's failure without calling the communicator") {
  testing::OnEveryRankComm(1, [&](int, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    CollectiveQueue queue(true);
    QueuedCommunicator front(rec, queue);
    queue.Submit([] { return AbortedError("gradient reduce-scatter: rank 1 closed its connection"); });
    std::vector<float> one = {1.0f};
    const Status status = front.AllReduce(std::span<float>(one), ReduceOp::kSum);
    CHECK(status.code() == StatusCode::kAborted);
    CHECK(status.ToString().find("rank 1 closed its connection") != std::string::npos);
    CHECK(rec.calls().empty());
  });
}

}  // namespace
}  // namespace dslaunch::runtime
