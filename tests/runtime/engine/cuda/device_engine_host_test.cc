// The device engine against ZeroEngine, without a GPU: device_engine.cc and the device GPT
// (runtime/models/cuda/gpt.cc) linked with the host stand-in of the CUDA runtime and ops
// (tests/fakes/host_cuda.cc: every op its CPU twin) and of NCCL (tests/fakes/host_collectives.h: a
// thread communicator), on 1-3 ranks. Any difference is then the engine's own (a stage that reduces
// the wrong range, a rounding in the wrong place, a step that skips or clips otherwise, state
// saved from the wrong slice): the losses, the norms and every byte of the state a checkpoint
// saves must be ZeroEngine's with GptModel, for every ZeRO stage and precision.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "tests/fakes/host_collectives.h"
#include "tests/fakes/host_streams.h"
#include "tests/runtime/engine/cuda/engine_runs.h"

namespace dslaunch::runtime {
namespace {

using testing::CpuRank;
using testing::HostStreamOrder;
using testing::DeviceRank;
using testing::OptionsFor;
using testing::RankRun;
using testing::RunOn;
using testing::SameBits;
using testing::Whole;
using testing::WholeState;

// The three orders of the stand-in's streams (tests/fakes/host_streams.h): at once, and the
// collectives' stream ahead of the compute stream or behind it, as far as the engine's OrderAfter
// and OrderBefore let them be. A missing order changes the bits under one of the latter two.
const HostStreamOrder kOrders[] = {HostStreamOrder::kImmediate, HostStreamOrder::kCommFirst,
                                   HostStreamOrder::kComputeFirst};

// Sets the stand-in's stream order for a scope, and back to kImmediate after it.
struct StreamOrder {
  explicit StreamOrder(HostStreamOrder order) { testing::SetHostStreamOrder(order); }
  ~StreamOrder() { testing::SetHostStreamOrder(HostStreamOrder::kImmediate); }
};

TEST_CASE("the device engine on the stand-ins gives ZeroEngine's losses, norms and saved state to the bit") {
  for (HostStreamOrder order : kOrders) {
  StreamOrder scope(order);
  CAPTURE(static_cast<int>(order));
  for (int stage = 0; stage <= 3; ++stage) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      for (int world = 1; world <= 3; ++world) {
        CAPTURE(stage);
        CAPTURE(PrecisionName(precision));
        CAPTURE(world);
        const EngineOptions options = OptionsFor(stage, precision);
        const int steps = 4, accumulation = 2;
        const std::vector<RankRun> cpu = RunOn(world, steps, accumulation, [&](int, Communicator& comm) {
          return std::make_unique<CpuRank>(comm, options);
        });
        std::vector<std::unique_ptr<testing::HostCollectives>> collectives(world);
        const std::vector<RankRun> device = RunOn(world, steps, accumulation, [&](int r, Communicator& comm) {
          collectives[r] = std::make_unique<testing::HostCollectives>(comm);
          return std::make_unique<DeviceRank>(*collectives[r], options, testing::NewHostStream(false));
        });
        for (int r = 0; r < world; ++r) {
          CAPTURE(r);
          CHECK(SameBits(device[r].losses, cpu[r].losses));
          CHECK(SameBits(device[r].norms, cpu[r].norms));  // an overflow's inf or NaN too
          CHECK(device[r].skipped == cpu[r].skipped);
          CHECK(device[r].optimizer_step == cpu[r].optimizer_step);
          CHECK(device[r].range.begin == cpu[r].range.begin);
          CHECK(device[r].range.end == cpu[r].range.end);
          // What it allocated is what PlanBytes counts before allocating (the memory check's figure).
          const MemoryStats plan =
              DeviceEngine::PlanBytes(GptModel(testing::TinyConfig(), 0).layout(), options, world, r);
          CHECK(device[r].memory.parameters == plan.parameters);
          CHECK(device[r].memory.gradients == plan.gradients);
          CHECK(device[r].memory.optimizer_state == plan.optimizer_state);
          CHECK(device[r].memory.working == plan.working);
          REQUIRE(device[r].state.size() == cpu[r].state.size());
          for (size_t i = 0; i < cpu[r].state.size(); ++i) {
            CAPTURE(i);
            CHECK(SameBits(device[r].state[i], cpu[r].state[i]));
          }
        }
        // The runs train: the loss moves, and fp16 skipped its first steps and then updated.
        CHECK(cpu[0].losses.front() != cpu[0].losses.back());
        if (precision == Precision::kFp16) {
          CHECK(cpu[0].skipped.front() == 1);
          CHECK(cpu[0].optimizer_step >= 1);
          CHECK(cpu[0].optimizer_step < steps);
        } else {
          CHECK(cpu[0].optimizer_step == steps);
        }
      }
    }
  }
  }
}

// The state a run on the device saved resumes on the CPU engine, and the CPU's on the device: the
// steps after it are those of the run that never stopped, to the bit. A checkpoint holds exactly
// this state (runtime/checkpoint/: every rank's range of every tensor and the counters).
TEST_CASE("state the device engine saved resumes on ZeroEngine and back, and on another number of ranks") {
  StreamOrder scope(HostStreamOrder::kCommFirst);
  for (auto [stage, precision] : {std::pair{2, Precision::kBf16}, {3, Precision::kFp16}, {1, Precision::kFp32}}) {
    CAPTURE(stage);
    CAPTURE(PrecisionName(precision));
    const EngineOptions options = OptionsFor(stage, precision);
    const int world = 2, accumulation = 2;
    std::vector<std::unique_ptr<testing::HostCollectives>> collectives(3);
    auto cpu = [&](int, Communicator& comm) { return std::make_unique<CpuRank>(comm, options); };
    auto device = [&](int r, Communicator& comm) {
      collectives[r] = std::make_unique<testing::HostCollectives>(comm);
      return std::make_unique<DeviceRank>(*collectives[r], options, testing::NewHostStream(false));
    };
    const size_t numel = GptModel(testing::TinyConfig(), 0).layout().numel();
    const WholeState device_whole = Whole(RunOn(world, 5, accumulation, device), options, numel);
    const WholeState cpu_whole = Whole(RunOn(world, 5, accumulation, cpu), options, numel);
    REQUIRE(device_whole.tensors == cpu_whole.tensors);

    const WholeState device_3 = Whole(RunOn(world, 3, accumulation, device), options, numel);
    const WholeState cpu_3 = Whole(RunOn(world, 3, accumulation, cpu), options, numel);
    const std::vector<RankRun> on_cpu = RunOn(world, 2, accumulation, cpu, &device_3);
    const std::vector<RankRun> on_device = RunOn(world, 2, accumulation, device, &cpu_3);
    const WholeState after_cpu = Whole(on_cpu, options, numel), after_device = Whole(on_device, options, numel);
    for (size_t i = 0; i < cpu_whole.tensors.size(); ++i) {
      CAPTURE(cpu_whole.names[i]);
      CHECK(SameBits(after_cpu.tensors[i], cpu_whole.tensors[i]));
      CHECK(SameBits(after_device.tensors[i], cpu_whole.tensors[i]));
    }
    CHECK(after_cpu.optimizer_step == cpu_whole.optimizer_step);
    CHECK(after_device.optimizer_step == cpu_whole.optimizer_step);
    CHECK(after_device.loss_scaler.scale == cpu_whole.loss_scaler.scale);

    // Three ranks take the two-rank state: each restores its own slice, and the state they save
    // straight away is the one they read.
    const std::vector<RankRun> on_three = RunOn(3, 0, accumulation, device, &device_3);
    const WholeState three = Whole(on_three, options, numel);
    for (size_t i = 0; i < three.tensors.size(); ++i) CHECK(SameBits(three.tensors[i], device_3.tensors[i]));
  }
}

}  // namespace
}  // namespace dslaunch::runtime
