// PlanDevice: where a worker built with CUDA trains, for each "device" value and what the machine
// shows (docs/gpu.md, "Training on the device").
#include "runtime/train/device_plan.h"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

TrainConfig GptRun(TrainDevice device) {
  TrainConfig config;
  config.device = device;
  config.model = GptConfig{2, 2, 16, 8, 32, 0};
  return config;
}

WorkerIdentity LocalRank(int local_rank, int local_world) {
  WorkerIdentity id;
  id.local_rank = local_rank;
  id.local_world_size = local_world;
  return id;
}

TEST_CASE("PlanDevice gives each local rank its own GPU for \"auto\" and \"cuda\", none for \"cpu\"") {
  for (TrainDevice device : {TrainDevice::kAuto, TrainDevice::kCuda}) {
    auto plan = PlanDevice(GptRun(device), LocalRank(2, 4), 4, "", std::string("0,1,2,3"));
    REQUIRE(plan.ok());
    CHECK(plan->device == 2);
    CHECK(plan->line.empty());
  }
  auto cpu = PlanDevice(GptRun(TrainDevice::kCpu), LocalRank(0, 1), 8, "", std::nullopt);
  REQUIRE(cpu.ok());
  CHECK(!cpu->device);
  CHECK(cpu->line.empty());
}

TEST_CASE("PlanDevice without a visible device: \"auto\" trains on the CPU saying why once per node, \"cuda\" fails") {
  auto first = PlanDevice(GptRun(TrainDevice::kAuto), LocalRank(0, 2), 0, "cudaGetDeviceCount: no CUDA-capable device",
                          std::string("0,1"));
  REQUIRE(first.ok());
  CHECK(!first->device);
  CHECK(first->line ==
        "device: auto: no CUDA device visible (cudaGetDeviceCount: no CUDA-capable device), CUDA_VISIBLE_DEVICES "
        "\"0,1\"; training on the CPU");
  auto second = PlanDevice(GptRun(TrainDevice::kAuto), LocalRank(1, 2), 0, "", std::nullopt);
  REQUIRE(second.ok());
  CHECK(second->line.empty());
  auto asked = PlanDevice(GptRun(TrainDevice::kCuda), LocalRank(0, 1), 0, "", std::nullopt);
  CHECK(asked.status().code() == StatusCode::kFailedPrecondition);
  CHECK(asked.status().message() ==
        "device \"cuda\": no CUDA device visible, CUDA_VISIBLE_DEVICES unset; \"device\": \"cpu\" trains on the CPU");
}

TEST_CASE("PlanDevice keeps on the CPU what the device does not train yet, naming the key") {
  TrainConfig mlp = GptRun(TrainDevice::kCuda);
  mlp.model = MlpConfig{};
  TrainConfig pipelined = GptRun(TrainDevice::kCuda);
  pipelined.pipeline.stages = 2;
  TrainConfig split = GptRun(TrainDevice::kCuda);
  split.tensor_parallel.size = 2;
  TrainConfig recomputed = GptRun(TrainDevice::kCuda);
  std::get<GptConfig>(recomputed.model).recompute_blocks = 1;
  for (auto [config, key] : {std::pair{mlp, "model.type"}, {pipelined, "pipeline.stages"}, {split, "tensor_parallel"},
                             {recomputed, "activation_checkpointing"}}) {
    CAPTURE(key);
    auto refused = PlanDevice(config, LocalRank(0, 1), 1, "", std::nullopt);
    CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
    CHECK(refused.status().message().rfind(std::string("device \"cuda\": ") + key, 0) == 0);
    config.device = TrainDevice::kAuto;
    auto cpu = PlanDevice(config, LocalRank(0, 1), 1, "", std::nullopt);
    REQUIRE(cpu.ok());
    CHECK(!cpu->device);
    CHECK(cpu->line.rfind(std::string("device: auto: ") + key, 0) == 0);
  }
}

TEST_CASE("PlanDevice refuses more local ranks than devices, as DeviceForLocalRank does") {
  auto crowded = PlanDevice(GptRun(TrainDevice::kAuto), LocalRank(2, 3), 2, "", std::string("0,1"));
  CHECK(crowded.status().code() == StatusCode::kFailedPrecondition);
  CHECK(crowded.status().message().find("LOCAL_RANK") != std::string::npos);
}

// `devices[r]`: whether rank r planned a device; every rank's agreed plan.
std::vector<DevicePlan> Agree(const std::vector<bool>& devices) {
  testing::ThreadCommunicatorGroup group(static_cast<int>(devices.size()));
  std::vector<DevicePlan> agreed(devices.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < devices.size(); ++r) {
    threads.emplace_back([&, r] {
      DevicePlan plan;
      if (devices[r]) plan.device = static_cast<int>(r);
      auto result = AgreeOnDevice(group.Get(static_cast<int>(r)), plan);
      REQUIRE(result.ok());
      agreed[r] = *result;
    });
  }
  for (auto& t : threads) t.join();
  return agreed;
}

TEST_CASE("AgreeOnDevice: every rank on its device, or every rank on the CPU when one has none") {
  const std::vector<DevicePlan> all = Agree({true, true, true});
  for (size_t r = 0; r < all.size(); ++r) {
    CHECK(all[r].device == static_cast<int>(r));
    CHECK(all[r].line.empty());
  }
  const std::vector<DevicePlan> one_short = Agree({true, false, true});
  for (const DevicePlan& plan : one_short) CHECK(!plan.device);
  CHECK(one_short[0].line == "device: auto: 1 of 3 ranks have no device; every rank trains on the CPU");
  CHECK(one_short[2].line.empty());
}

}  // namespace
}  // namespace dslaunch::runtime
