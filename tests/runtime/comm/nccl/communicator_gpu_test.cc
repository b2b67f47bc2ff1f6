// The NCCL communicator on a real GPU at world size 1 (one GPU cannot host two ranks of one NCCL
// communicator): initialisation through a real store endpoint, each collective's plumbing, the
// enqueue-and-synchronize path with ordering after a compute stream, and aborts (requested,
// stopped, and an initialisation whose second rank never comes). What needs two GPUs (reductions
// across ranks, a peer dying mid-collective) is listed in docs/gpu.md.
#include "runtime/comm/nccl/communicator.h"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "tests/support/device_array.h"
#include "tests/support/gpu_device.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using dslaunch::testing::DeviceArray;
using dslaunch::testing::TestEndpoint;

// Bounds a broken test; a world-1 group forms in well under a second.
constexpr milliseconds kInitTimeout{30000};

std::vector<float> Ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

std::unique_ptr<NcclCommunicator> WorldOfOne(StoreClient& store, NcclOptions options = {}) {
  options.init_timeout = kInitTimeout;
  auto comm = NcclCommunicator::Create(store, 0, 1, options);
  REQUIRE_MESSAGE(comm.ok(), comm.status().ToString());
  return std::move(comm).value();
}

TEST_CASE("NCCL forms a group of one through the store and runs every collective on device memory") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = WorldOfOne(*client);
  CHECK(comm->Describe() == "nccl rank 0/1 on cuda:0");
  // The id went through the store under the generation's prefix.
  CHECK(client->Check({NcclUniqueIdKey(0)}).value());

  constexpr size_t kCount = 1000;  // not a multiple of anything NCCL chunks by
  DeviceArray<float> data(kCount);
  data.Put(Ramp(kCount, -3.0f));
  REQUIRE(comm->AllReduce(BufferView{data.data(), kCount, DType::kFloat32}, ReduceOp::kSum).ok());
  CHECK(data.Get() == Ramp(kCount, -3.0f));  // the sum over one rank
  REQUIRE(comm->AllReduce(BufferView{data.data(), kCount, DType::kFloat32}, ReduceOp::kAvg).ok());
  CHECK(data.Get() == Ramp(kCount, -3.0f));
  REQUIRE(comm->AllReduce(BufferView{data.data(), kCount, DType::kFloat32}, ReduceOp::kMax).ok());

  // bf16 is reduced natively.
  std::vector<BFloat16> halves(kCount);
  const std::vector<float> ramp = Ramp(kCount, 1.0f);
  FloatToBFloat16(ramp, halves);
  DeviceArray<BFloat16> sixteen(kCount);
  sixteen.Put(halves);
  REQUIRE(comm->AllReduce(BufferView{sixteen.data(), kCount, DType::kBFloat16}, ReduceOp::kSum).ok());
  CHECK(sixteen.Get() == halves);

  DeviceArray<float> out(kCount);
  REQUIRE(comm->ReduceScatter(ConstBufferView{data.data(), kCount, DType::kFloat32},
                              BufferView{out.data(), kCount, DType::kFloat32}, {kCount}, ReduceOp::kSum)
              .ok());
  CHECK(out.Get() == data.Get());
  DeviceArray<float> gathered(kCount);
  REQUIRE(comm->AllGather(ConstBufferView{data.data(), kCount, DType::kFloat32},
                          BufferView{gathered.data(), kCount, DType::kFloat32}, {kCount})
              .ok());
  CHECK(gathered.Get() == data.Get());
  REQUIRE(comm->Broadcast(BufferView{data.data(), kCount, DType::kFloat32}, 0).ok());
  REQUIRE(comm->Barrier().ok());
  CHECK(comm->health().ok());
}

TEST_CASE("Buckets enqueued in one group after a compute stream's kernels are all reduced by one Synchronize") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = WorldOfOne(*client);
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
  constexpr size_t kBucket = 4096;
  std::vector<std::unique_ptr<DeviceArray<float>>> buckets;
  for (int b = 0; b < 3; ++b) {
    buckets.push_back(std::make_unique<DeviceArray<float>>(kBucket));
    // The "backward" fills the bucket on the compute stream; the reduction must see these bytes.
    REQUIRE(cudaMemsetAsync(buckets.back()->data(), 0x3f, kBucket * sizeof(float), compute) == cudaSuccess);
  }
  REQUIRE(comm->OrderAfter(compute).ok());
  REQUIRE(comm->BeginGroup().ok());
  for (auto& bucket : buckets) {
    REQUIRE(comm->EnqueueAllReduce(BufferView{bucket->data(), kBucket, DType::kFloat32}, ReduceOp::kSum).ok());
  }
  REQUIRE(comm->EndGroup().ok());
  REQUIRE(comm->Synchronize("buckets").ok());
  float expected;
  const uint32_t bits = 0x3f3f3f3fu;
  std::memcpy(&expected, &bits, sizeof(expected));
  for (auto& bucket : buckets) CHECK(bucket->Get() == std::vector<float>(kBucket, expected));
  cudaStreamDestroy(compute);
}

TEST_CASE("A host pointer is refused before NCCL sees it, and the communicator stays usable") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = WorldOfOne(*client);
  std::vector<float> host(16, 1.0f);
  Status st = comm->AllReduce(host, ReduceOp::kSum);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("host pointer") != std::string::npos);
  CHECK(comm->health().ok());
  DeviceArray<float> data(16);
  data.Put(host);
  CHECK(comm->AllReduce(BufferView{data.data(), 16, DType::kFloat32}, ReduceOp::kSum).ok());
}

TEST_CASE("An abort requested from another thread ends the next collective and every later one") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  auto comm = WorldOfOne(*client);
  std::thread watchdog([&] { comm->RequestAbort("watchdog: no progress for 30 s"); });
  watchdog.join();
  DeviceArray<float> data(64);
  // At world size 1 the reduction finishes before the first poll: the flag is read before NCCL
  // is called, so this very call is the one aborted.
  Status st = comm->AllReduce(BufferView{data.data(), 64, DType::kFloat32}, ReduceOp::kSum);
  REQUIRE(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("watchdog: no progress for 30 s") != std::string::npos);
  Status later = comm->Barrier();
  CHECK(later.code() == StatusCode::kAborted);
  CHECK(later.message().find("unusable after an earlier error") != std::string::npos);
}

TEST_CASE("The worker's stop flag aborts a communicator's collectives") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  std::atomic<bool> stop{false};
  NcclOptions options;
  options.stop = &stop;
  auto comm = WorldOfOne(*client, options);
  REQUIRE(comm->Barrier().ok());
  stop.store(true);
  Status st = comm->Barrier();
  REQUIRE(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("told to stop") != std::string::npos);
}

TEST_CASE("An initialisation whose other rank never comes is aborted at its deadline, and the GPU stays usable") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  NcclOptions options;
  options.context_id = 7;
  options.init_timeout = milliseconds(3000);
  const auto start = Clock::now();
  auto lonely = NcclCommunicator::Create(*client, 0, 2, options);
  const auto waited = Clock::now() - start;
  REQUIRE_FALSE(lonely.ok());
  CHECK(lonely.status().code() == StatusCode::kUnavailable);
  CHECK(lonely.status().message().find("did not form within 3.0 s") != std::string::npos);
  CHECK(waited >= milliseconds(3000));
  CHECK(waited < milliseconds(3000) + kInitTimeout / 2);  // ncclCommAbort returned
  // A new group on the same device forms and works after the abort.
  NcclOptions next;
  next.context_id = 8;
  auto comm = WorldOfOne(*client, next);
  CHECK(comm->Barrier().ok());
}

TEST_CASE("A stop while the group forms aborts the initialisation at once") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  std::atomic<bool> stop{false};
  NcclOptions options;
  options.context_id = 9;
  options.init_timeout = kInitTimeout;
  options.stop = &stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(500));
    stop.store(true);
  });
  const auto start = Clock::now();
  auto lonely = NcclCommunicator::Create(*client, 0, 2, options);
  const auto waited = Clock::now() - start;
  stopper.join();
  REQUIRE_FALSE(lonely.ok());
  CHECK(lonely.status().code() == StatusCode::kAborted);
  CHECK(waited < kInitTimeout / 2);
}

TEST_CASE("A device out of range is refused with the count this process sees") {
  DSLAUNCH_REQUIRE_GPU();
  TestEndpoint ep;
  auto client = ep.Client();
  NcclOptions options;
  options.device = 4096;
  auto comm = NcclCommunicator::Create(*client, 0, 1, options);
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == StatusCode::kInvalidArgument);
  CHECK(comm.status().message().find("device out of range") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
