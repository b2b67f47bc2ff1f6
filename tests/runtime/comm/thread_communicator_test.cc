// The in-process communicator: every collective for world sizes 1-4 with uneven counts, argument
// checks, and injected faults (a dead or missing rank fails the others with kAborted naming it).
#include "tests/fakes/thread_communicator.h"

#include <doctest/doctest.h>

#include <functional>
#include <future>
#include <thread>

#include "tests/runtime/comm/collective_script.h"
#include "tests/runtime/comm/pipeline_exchange.h"

namespace dslaunch::runtime::testing {
namespace {

using std::chrono::milliseconds;

// Runs `body(rank, comm)` on one thread per rank and returns each rank's status.
std::vector<Status> RunRanks(ThreadCommunicatorGroup& group,
                             const std::function<Status(int, Communicator&)>& body) {
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < group.world_size(); ++r) {
    futures.push_back(std::async(std::launch::async, [&, r] { return body(r, group.Get(r)); }));
  }
  std::vector<Status> statuses;
  for (auto& f : futures) statuses.push_back(f.get());
  return statuses;
}

TEST_CASE("ThreadCommunicator runs every collective with uneven counts for world sizes 1 to 4") {
  for (int world = 1; world <= 4; ++world) {
    CAPTURE(world);
    ThreadCommunicatorGroup group(world);
    std::vector<ScriptOutputs> outputs(world);
    auto statuses = RunRanks(
        group, [&](int r, Communicator& comm) { return RunCollectiveScript(comm, outputs[r]); });
    for (int r = 0; r < world; ++r) {
      CAPTURE(r);
      REQUIRE_MESSAGE(statuses[r].ok(), statuses[r].ToString());
      const ScriptOutputs expected = ExpectedScript(world, r);
      REQUIRE(outputs[r].results.size() == expected.results.size());
      for (size_t step = 0; step < expected.results.size(); ++step) {
        CAPTURE(step);
        CHECK(outputs[r].results[step] == expected.results[step]);
      }
      CHECK(outputs[r].ints == expected.ints);
    }
  }
}

TEST_CASE("Communicator rejects malformed arguments locally and stays usable") {
  ThreadCommunicatorGroup group(2);
  auto statuses = RunRanks(group, [](int r, Communicator& comm) -> Status {
    std::vector<float> in(9), out(4);
    Status st = comm.ReduceScatter(in, out, {5, 4, 0}, ReduceOp::kSum);  // 3 counts for world 2
    if (st.code() != StatusCode::kInvalidArgument) return InternalError("counts: " + st.ToString());
    st = comm.ReduceScatter(in, std::span<float>(out).first(3), {5, 4}, ReduceOp::kSum);
    if (r == 1 && st.code() != StatusCode::kInvalidArgument)
      return InternalError("block: " + st.ToString());
    st = comm.Broadcast(in, 2);
    if (st.code() != StatusCode::kInvalidArgument) return InternalError("root: " + st.ToString());
    std::vector<uint16_t> half(4);
    st = comm.AllReduce(View(std::span<uint16_t>(half), DType::kFloat16), ReduceOp::kSum);
    if (st.code() != StatusCode::kInvalidArgument) return InternalError("dtype: " + st.ToString());
    std::vector<int64_t> ints(4);
    st = comm.AllReduce(View(std::span<int64_t>(ints)), ReduceOp::kMax);
    if (st.code() != StatusCode::kInvalidArgument || st.message() != "allreduce on rank " + std::to_string(r) +
                                                                          "/2: cannot reduce int64") {
      return InternalError("int64: " + st.ToString());
    }
    std::vector<int64_t> gathered(7);
    st = comm.AllGather(std::span<const int64_t>(ints), std::span<int64_t>(gathered), {4, 4});
    if (st.code() != StatusCode::kInvalidArgument) return InternalError("int64 counts: " + st.ToString());
    st = comm.Send(std::span<const float>(in), r);  // to itself
    if (st.code() != StatusCode::kInvalidArgument || st.message() != "send on rank " + std::to_string(r) +
                                                                          "/2: peer " + std::to_string(r) +
                                                                          " is not another rank of the group") {
      return InternalError("send to self: " + st.ToString());
    }
    st = comm.Recv(std::span<float>(in), 2);
    if (st.code() != StatusCode::kInvalidArgument) return InternalError("recv from 2: " + st.ToString());
    if (!comm.health().ok()) return InternalError("unhealthy after argument errors");
    return comm.Barrier();
  });
  for (const Status& st : statuses) CHECK_MESSAGE(st.ok(), st.ToString());
}

TEST_CASE("ThreadCommunicator delivers a pipeline's sends in order without the sender waiting") {
  for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
    for (int stages : {2, 3, 4}) {
      CAPTURE(PipeScheduleName(schedule));
      CAPTURE(stages);
      ThreadCommunicatorGroup group(stages);
      auto statuses =
          RunRanks(group, [&](int, Communicator& comm) { return RunPipelineExchange(comm, schedule, 8); });
      for (const Status& st : statuses) CHECK_MESSAGE(st.ok(), st.ToString());
    }
  }
  // A receive of another size than the message is the schedules disagreeing.
  ThreadCommunicatorGroup group(2);
  auto statuses = RunRanks(group, [](int r, Communicator& comm) -> Status {
    std::vector<float> data(r == 0 ? 10 : 5);
    return r == 0 ? comm.Send(std::span<const float>(data), 1) : comm.Recv(data, 0);
  });
  CHECK(statuses[0].ok());
  CHECK(statuses[1].code() == StatusCode::kInternal);
}

TEST_CASE("A rank that dies mid-run fails every other rank with kAborted naming it") {
  ThreadFaultOptions faults;
  faults.die_rank = 2;
  faults.die_at_call = 1;
  ThreadCommunicatorGroup group(4, milliseconds(5000), faults);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> second(4);
  auto statuses = RunRanks(group, [&](int r, Communicator& comm) -> Status {
    std::vector<float> data(8, 1.0f);
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(data, ReduceOp::kSum));
    Status st = comm.AllReduce(data, ReduceOp::kSum);
    second[r] = comm.Barrier();
    return st;
  });
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(2000));  // not the timeout
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(statuses[r].code() == StatusCode::kAborted);
    CHECK(statuses[r].message().find("rank 2") != std::string::npos);
    CHECK(second[r].code() == StatusCode::kAborted);
    CHECK(second[r].message().find("unusable") != std::string::npos);
  }
}

TEST_CASE("A rank that never joins fails the others after the timeout, naming it") {
  ThreadCommunicatorGroup group(3, milliseconds(300));
  auto statuses = RunRanks(group, [](int r, Communicator& comm) -> Status {
    if (r == 1) return Status::Ok();  // stalls: never calls
    std::vector<float> data(8, 1.0f);
    return comm.AllReduce(data, ReduceOp::kMax);
  });
  for (int r : {0, 2}) {
    CAPTURE(r);
    CHECK(statuses[r].code() == StatusCode::kAborted);
    CHECK(statuses[r].message().find("rank 1 (thread) did not join") != std::string::npos);
  }
}

TEST_CASE("Kill from outside aborts a rank blocked in a collective") {
  ThreadCommunicatorGroup group(2, milliseconds(10000));
  bool entered = false;
  std::thread killer([&] {
    entered = group.WaitUntilEntered(0, milliseconds(10000));
    group.Kill(1);
  });
  std::vector<float> data(4, 1.0f);
  Status st = group.Get(0).AllReduce(data, ReduceOp::kSum);
  killer.join();
  CHECK(entered);  // killed while rank 0 was blocked, not before it called
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message() == "rank 1 (thread) died");
}

TEST_CASE("Mismatched calls are reported as an internal error") {
  ThreadCommunicatorGroup group(2);
  auto statuses = RunRanks(group, [](int r, Communicator& comm) -> Status {
    std::vector<float> data(4, 1.0f);
    return comm.AllReduce(data, r == 0 ? ReduceOp::kSum : ReduceOp::kMax);
  });
  for (const Status& st : statuses) CHECK(st.code() == StatusCode::kInternal);
}

TEST_CASE("BlockOffsets gives prefix sums") {
  CHECK(BlockOffsets({}) == std::vector<size_t>{0});
  CHECK(BlockOffsets({5, 0, 3}) == std::vector<size_t>{0, 5, 5, 8});
}

}  // namespace
}  // namespace dslaunch::runtime::testing
