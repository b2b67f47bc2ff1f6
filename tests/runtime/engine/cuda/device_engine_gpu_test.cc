// The device engine on a GPU: device_engine.cc with the CUDA kernels and NCCL (a group of one
// formed through a real store endpoint), against ZeroEngine with GptModel on the CPU. The host
// test (device_engine_host_test.cc) proved the engine's order of operations to the bit on stand-ins;
// here the kernels sum in other orders (cuBLASLt, the norm's tree), so the losses are compared
// within tolerances, and what only a GPU shows is checked: the streams' ordering (a missing event
// reads a gradient before it is written), device memory, NCCL's collectives on the engine's buffers.
#include "runtime/engine/cuda/device_engine.h"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "runtime/comm/nccl/communicator.h"
#include "tests/runtime/engine/cuda/engine_runs.h"
#include "tests/support/gpu_device.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

using testing::CpuRank;
using testing::DeviceRank;
using testing::OptionsFor;
using testing::RankRun;
using testing::RunOn;
using testing::Whole;
using testing::WholeState;

// cuBLASLt and OpenBLAS sum the products in other orders; over 8 micro-steps of training the
// losses of this tiny model stay within this of each other (the model tests' bound, runtime/models).
constexpr float kLossTolerance = 1e-3f;

struct GpuRun {
  std::unique_ptr<NcclCommunicator> nccl;
  cudaStream_t compute = nullptr;
  std::unique_ptr<DeviceRank> rank;

  GpuRun(StoreClient& store, const EngineOptions& options, int context) {
    NcclOptions nccl_options;
    nccl_options.context_id = context;
    nccl_options.init_timeout = std::chrono::milliseconds(30000);
    auto made = NcclCommunicator::Create(store, 0, 1, nccl_options);
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    nccl = std::move(*made);
    REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
    rank = std::make_unique<DeviceRank>(*nccl, options, compute);
  }
  ~GpuRun() {
    rank.reset();
    cudaStreamDestroy(compute);
  }
  RankRun Train(int steps, int accumulation, const WholeState* from = nullptr) {
    return testing::TrainRank(*rank, 0, steps, accumulation, from);
  }
};

void CheckClose(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CAPTURE(got[i]);
    CAPTURE(want[i]);
    CHECK(std::isfinite(got[i]));
    CHECK(std::fabs(got[i] - want[i]) <= tolerance);
  }
}

TEST_CASE("the device engine on a GPU trains as ZeroEngine does, for every stage and precision") {
  DSLAUNCH_REQUIRE_GPU();
  dslaunch::testing::TestEndpoint ep;
  auto store = ep.Client();
  int context = 0;
  for (int stage = 0; stage <= 3; ++stage) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      CAPTURE(stage);
      CAPTURE(PrecisionName(precision));
      const EngineOptions options = OptionsFor(stage, precision);
      const int steps = 4, accumulation = 2;
      const RankRun cpu =
          RunOn(1, steps, accumulation, [&](int, Communicator& comm) { return std::make_unique<CpuRank>(comm, options); })
              .front();
      GpuRun gpu(*store, options, context++);
      const RankRun device = gpu.Train(steps, accumulation);
      CHECK(device.skipped.front() == cpu.skipped.front());
      if (precision != Precision::kFp16) {
        CHECK(device.skipped == cpu.skipped);
        CheckClose(device.losses, cpu.losses, kLossTolerance);
      } else {
        CHECK(std::fabs(device.losses.back() - cpu.losses.back()) <= 2e-2f);
      }
      CHECK(device.losses.back() < device.losses.front());
      CHECK(gpu.rank->engine->device_bytes() > 0);
    }
  }
}

TEST_CASE("state the device engine saved on a GPU resumes on ZeroEngine") {
  DSLAUNCH_REQUIRE_GPU();
  dslaunch::testing::TestEndpoint ep;
  auto store = ep.Client();
  const EngineOptions options = OptionsFor(2, Precision::kBf16);
  const size_t numel = GptModel(testing::TinyConfig(), 0).layout().numel();
  GpuRun gpu(*store, options, 0);
  const RankRun first = gpu.Train(3, 2);
  const WholeState saved = Whole({first}, options, numel);
  auto cpu = [&](int, Communicator& comm) { return std::make_unique<CpuRank>(comm, options); };
  const RankRun resumed = RunOn(1, 2, 2, cpu, &saved).front();
  const RankRun uninterrupted = RunOn(1, 5, 2, cpu).front();
  // The CPU's last four micro-steps after the GPU's first three steps, against the CPU's own.
  CheckClose(resumed.losses, std::vector<float>(uninterrupted.losses.end() - 4, uninterrupted.losses.end()),
             kLossTolerance);
}

TEST_CASE("the device engine refuses what it does not do yet, naming the key") {
  DSLAUNCH_REQUIRE_GPU();
  dslaunch::testing::TestEndpoint ep;
  auto store = ep.Client();
  NcclOptions nccl_options;
  auto nccl = NcclCommunicator::Create(*store, 0, 1, nccl_options);
  REQUIRE(nccl.ok());
  const GptModel shape(testing::TinyConfig(), 0);
  const InitialValues initial = [&](size_t begin, std::span<float> out) { shape.InitRange(begin, out, 1); };
  EngineOptions sgd = OptionsFor(1, Precision::kFp32);
  sgd.optimizer.kind = OptimizerKind::kSgd;
  const auto refused = DeviceEngine::Create(shape.layout(), **nccl, sgd, initial, nullptr);
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("optimizer.type") != std::string::npos);
  EngineOptions stage9 = OptionsFor(1, Precision::kFp32);
  stage9.zero.stage = 9;
  CHECK(DeviceEngine::Create(shape.layout(), **nccl, stage9, initial, nullptr).status().code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime
