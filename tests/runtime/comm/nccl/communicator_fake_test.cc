// NcclCommunicator's own logic without a GPU: communicator.cc linked with a scripted stand-in of
// NCCL and the CUDA runtime (tests/fakes/fake_nccl.h), and the unique id through a real store
// endpoint. What it checks: an initialisation that never finishes is aborted at its deadline or at
// a stop; a healthy communicator is finalized and destroyed, a failed one aborted once; a host
// pointer is refused before NCCL sees it; a stalled collective ends at RequestAbort, at the stop
// flag or at the collective timeout; an error NCCL reports ends it; uneven counts become one call
// per block with the right offsets and roots, in one group. The real NCCL is the gpu tier's.
#include "runtime/comm/nccl/communicator.h"

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <thread>

#include "tests/fakes/fake_nccl.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using dslaunch::testing::FakeNccl;
using dslaunch::testing::FakeNcclCalls;
using dslaunch::testing::TestEndpoint;

// Bounds a wait the fake ends at once; a test that expects a deadline sets a short one.
constexpr milliseconds kLong{20000};

NcclOptions Options(int context_id) {
  NcclOptions options;
  options.context_id = context_id;
  options.init_timeout = kLong;
  options.collective_timeout = kLong;
  return options;
}

float* DeviceFloats(size_t count) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, count * sizeof(float)) == cudaSuccess);
  return static_cast<float*>(p);
}

TEST_CASE("An NCCL initialisation that never finishes is aborted at its deadline") {
  dslaunch::testing::ResetFakeNccl();
  FakeNccl().init_polls_in_progress = -1;
  TestEndpoint ep;
  auto client = ep.Client();
  NcclOptions options = Options(0);
  options.init_timeout = milliseconds(300);
  const auto start = Clock::now();
  auto comm = NcclCommunicator::Create(*client, 0, 2, options);
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == StatusCode::kUnavailable);
  CHECK(comm.status().message().find("nccl rank 0/2 on cuda:0: the group did not form within 0.3 s") == 0);
  CHECK(Clock::now() - start >= milliseconds(300));
  CHECK(FakeNccl().aborts == 1);
}

TEST_CASE("A stop while the NCCL group forms aborts the initialisation") {
  dslaunch::testing::ResetFakeNccl();
  FakeNccl().init_polls_in_progress = -1;
  TestEndpoint ep;
  auto client = ep.Client();
  std::atomic<bool> stop{false};
  NcclOptions options = Options(0);
  options.stop = &stop;
  std::thread stopper([&] {
    while (FakeNcclCalls("ncclCommInitRankConfig").empty()) std::this_thread::sleep_for(milliseconds(1));
    stop.store(true);
  });
  auto comm = NcclCommunicator::Create(*client, 0, 2, options);
  stopper.join();
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == StatusCode::kAborted);
  CHECK(comm.status().message().find("stopped while forming the group") != std::string::npos);
  CHECK(FakeNccl().aborts == 1);
}

TEST_CASE("A failed NCCL initialisation is reported with NCCL's text and aborted") {
  dslaunch::testing::ResetFakeNccl();
  FakeNccl().init_polls_in_progress = 2;
  FakeNccl().init_result = ncclRemoteError;
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 0, 2, Options(0));
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == StatusCode::kUnavailable);
  CHECK(comm.status().message().find("ncclCommInitRankConfig: remote process exited") != std::string::npos);
  CHECK(FakeNccl().aborts == 1);
}

TEST_CASE("A healthy NCCL communicator is finalized and destroyed, never aborted") {
  dslaunch::testing::ResetFakeNccl();
  FakeNccl().init_polls_in_progress = 3;
  TestEndpoint ep;
  auto client = ep.Client();
  {
    auto comm = NcclCommunicator::Create(*client, 0, 1, Options(0));
    REQUIRE_MESSAGE(comm.ok(), comm.status().ToString());
    CHECK((*comm)->Barrier().ok());
  }
  CHECK(FakeNccl().finalizes == 1);
  CHECK(FakeNccl().destroys == 1);
  CHECK(FakeNccl().aborts == 0);
}

TEST_CASE("A host pointer is refused before NCCL sees it and the communicator stays usable") {
  dslaunch::testing::ResetFakeNccl();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 0, 1, Options(0));
  REQUIRE(comm.ok());
  std::vector<float> host(8, 1.0f);
  Status st = (*comm)->AllReduce(host, ReduceOp::kSum);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("a host pointer") != std::string::npos);
  CHECK(FakeNcclCalls("ncclAllReduce").empty());
  CHECK((*comm)->health().ok());
  float* device = DeviceFloats(8);
  CHECK((*comm)->AllReduce(BufferView{device, 8, DType::kFloat32}, ReduceOp::kSum).ok());
  CHECK(FakeNcclCalls("ncclAllReduce").size() == 1);
  cudaFree(device);
}

TEST_CASE("A stalled collective ends at RequestAbort from another thread, and the communicator is aborted once") {
  dslaunch::testing::ResetFakeNccl();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 0, 1, Options(0));
  REQUIRE(comm.ok());
  FakeNccl().stream_never_done = true;
  std::thread watchdog([&] {
    while (FakeNcclCalls("ncclAllReduce").empty()) std::this_thread::sleep_for(milliseconds(1));
    (*comm)->RequestAbort("watchdog: no progress for 30 s");
  });
  float* device = DeviceFloats(4);
  Status st = (*comm)->AllReduce(BufferView{device, 4, DType::kFloat32}, ReduceOp::kSum);
  watchdog.join();
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message() == "nccl rank 0/1 on cuda:0: allreduce: watchdog: no progress for 30 s");
  CHECK(FakeNccl().aborts == 1);
  Status later = (*comm)->Barrier();
  CHECK(later.code() == StatusCode::kAborted);
  CHECK(later.message().find("unusable after an earlier error") != std::string::npos);
  comm->reset();
  CHECK(FakeNccl().aborts == 1);  // not aborted again, not finalized
  CHECK(FakeNccl().finalizes == 0);
  cudaFree(device);
}

TEST_CASE("An abort or a stop already requested ends the next collective before NCCL sees it, though it would finish at once") {
  // On a real GPU a group of one finishes a collective before the first poll looks at the flags
  // (the first GPU run showed it): the flags are read before anything is issued.
  for (bool by_stop : {false, true}) {
    CAPTURE(by_stop);
    dslaunch::testing::ResetFakeNccl();
    TestEndpoint ep;
    auto client = ep.Client();
    std::atomic<bool> stop{false};
    NcclOptions options = Options(0);
    options.stop = &stop;
    auto comm = NcclCommunicator::Create(*client, 0, 1, options);
    REQUIRE(comm.ok());
    float* device = DeviceFloats(4);
    REQUIRE((*comm)->AllReduce(BufferView{device, 4, DType::kFloat32}, ReduceOp::kSum).ok());
    if (by_stop) {
      stop.store(true);
    } else {
      (*comm)->RequestAbort("watchdog: no progress for 30 s");
    }
    Status st = (*comm)->AllReduce(BufferView{device, 4, DType::kFloat32}, ReduceOp::kSum);
    CHECK(st.code() == StatusCode::kAborted);
    CHECK(st.message() == (by_stop ? "nccl rank 0/1 on cuda:0: allreduce: the worker was told to stop"
                                   : "nccl rank 0/1 on cuda:0: allreduce: watchdog: no progress for 30 s"));
    CHECK(FakeNcclCalls("ncclAllReduce").size() == 1);  // the first one only
    CHECK(FakeNccl().aborts == 1);
    CHECK((*comm)->Barrier().code() == StatusCode::kAborted);
    CHECK(FakeNcclCalls("ncclAllReduce").size() == 1);
    cudaFree(device);
  }
}

TEST_CASE("A stalled collective ends at the worker's stop flag, and at the collective timeout") {
  for (bool by_stop : {true, false}) {
    CAPTURE(by_stop);
    dslaunch::testing::ResetFakeNccl();
    TestEndpoint ep;
    auto client = ep.Client();
    std::atomic<bool> stop{false};
    NcclOptions options = Options(0);
    options.stop = &stop;
    if (!by_stop) options.collective_timeout = milliseconds(200);
    auto comm = NcclCommunicator::Create(*client, 0, 1, options);
    REQUIRE(comm.ok());
    FakeNccl().stream_never_done = true;
    if (by_stop) stop.store(true);
    Status st = (*comm)->Barrier();
    CHECK(st.code() == StatusCode::kAborted);
    CHECK(st.message().find(by_stop ? "barrier: the worker was told to stop" : "barrier: not finished within 0.2 s") !=
          std::string::npos);
    CHECK(FakeNccl().aborts == 1);
  }
}

TEST_CASE("An error NCCL reports during a collective ends it, naming NCCL's text") {
  dslaunch::testing::ResetFakeNccl();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 0, 1, Options(0));
  REQUIRE(comm.ok());
  FakeNccl().async_error = ncclRemoteError;
  FakeNccl().stream_never_done = true;
  Status st = (*comm)->Barrier();
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("remote process exited or there was a network error (a peer failed or left)") !=
        std::string::npos);
  CHECK(FakeNccl().aborts == 1);
}

TEST_CASE("Uneven counts become one NCCL call per block, at its offset and root, in one group") {
  dslaunch::testing::ResetFakeNccl();
  TestEndpoint ep;
  // Rank 0 publishes the id; rank 1 of 3 (the one under test) reads it.
  auto zero_client = ep.Client();
  auto zero = NcclCommunicator::Create(*zero_client, 0, 3, Options(0));
  REQUIRE(zero.ok());
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 1, 3, Options(0));
  REQUIRE_MESSAGE(comm.ok(), comm.status().ToString());
  FakeNccl().calls.clear();

  const std::vector<size_t> counts = {2, 3, 4};
  float* input = DeviceFloats(9);
  float* output = DeviceFloats(3);
  REQUIRE((*comm)->ReduceScatter(ConstBufferView{input, 9, DType::kFloat32}, BufferView{output, 3, DType::kFloat32},
                                 counts, ReduceOp::kSum)
              .ok());
  auto reduces = FakeNcclCalls("ncclReduce");
  REQUIRE(reduces.size() == 3);
  const size_t offsets[] = {0, 2, 5};
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(reduces[r].send == input + offsets[r]);
    CHECK(reduces[r].count == counts[r]);
    CHECK(reduces[r].root == r);
  }
  CHECK(reduces[1].receive == output);  // this rank's block lands in its output
  CHECK(FakeNcclCalls("ncclGroupStart").size() == 1);
  CHECK(FakeNcclCalls("ncclGroupEnd").size() == 1);

  // AllGather with a zero block: no call for it; this rank's block broadcast from its input.
  FakeNccl().calls.clear();
  const std::vector<size_t> gather_counts = {2, 0, 4};
  float* gathered = DeviceFloats(6);
  REQUIRE((*comm)->AllGather(ConstBufferView{input, 0, DType::kFloat32}, BufferView{gathered, 6, DType::kFloat32},
                             gather_counts)
              .ok());
  auto broadcasts = FakeNcclCalls("ncclBroadcast");
  REQUIRE(broadcasts.size() == 2);
  CHECK(broadcasts[0].receive == gathered);
  CHECK(broadcasts[0].root == 0);
  CHECK(broadcasts[1].receive == gathered + 2);
  CHECK(broadcasts[1].root == 2);

  // Equal counts: NCCL's own reduce-scatter, one call.
  FakeNccl().calls.clear();
  REQUIRE((*comm)->ReduceScatter(ConstBufferView{input, 9, DType::kFloat32}, BufferView{output, 3, DType::kFloat32},
                                 {3, 3, 3}, ReduceOp::kAvg)
              .ok());
  CHECK(FakeNcclCalls("ncclReduceScatter").size() == 1);
  CHECK(FakeNcclCalls("ncclReduce").empty());
  cudaFree(input);
  cudaFree(output);
  cudaFree(gathered);
}

TEST_CASE("OrderAfter makes the communication stream wait for an event of the compute stream") {
  dslaunch::testing::ResetFakeNccl();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = NcclCommunicator::Create(*client, 0, 1, Options(0));
  REQUIRE(comm.ok());
  FakeNccl().calls.clear();
  REQUIRE((*comm)->OrderAfter(nullptr).ok());
  REQUIRE(FakeNccl().calls.size() == 2);
  CHECK(FakeNccl().calls[0].function == "cudaEventRecord");
  CHECK(FakeNccl().calls[1].function == "cudaStreamWaitEvent");
}

}  // namespace
}  // namespace dslaunch::runtime
