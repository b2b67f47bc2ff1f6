// The CUDA worker's device (runtime/worker_device.h) on the host stand-ins: linked with
// runtime/worker_main.cc, the device GPT, the device engine and tests/fakes/host_cuda.cc, it is
// dslaunch-worker-cuda with device memory in host memory and the collectives on the world's Gloo
// group (tests/fakes/host_collectives.h). Every local rank has a "device" of its own. The proc tier
// runs `dslaunch` with "device": "cuda" through it (tests/runtime/worker_device_proc_test.cc).
#include <variant>

#include "runtime/train/cuda/gpt_device_training.h"
#include "runtime/train/device_plan.h"
#include "runtime/worker_device.h"
#include "tests/fakes/host_collectives.h"

namespace dslaunch::runtime {

Status PrepareDevice(const TrainConfig&, const WorkerIdentity&, const std::map<std::string, std::string>&,
                     const std::vector<std::string>&, std::vector<std::string>&) {
  return Status::Ok();
}

Result<std::unique_ptr<DeviceTraining>> StartDevice(const TrainConfig& config, const WorkerIdentity& id,
                                                    const std::map<std::string, std::string>& env, StoreClient&,
                                                    Communicator& world, std::vector<std::string>& lines) {
  std::optional<std::string> visible;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) visible = it->second;
  DSLAUNCH_ASSIGN_OR_RETURN(DevicePlan plan, PlanDevice(config, id, id.local_world_size, "", visible));
  DSLAUNCH_ASSIGN_OR_RETURN(plan, AgreeOnDevice(world, std::move(plan)));
  if (!plan.line.empty()) lines.push_back(plan.line);
  if (!plan.device) return std::unique_ptr<DeviceTraining>();
  const auto& gpt = std::get<GptConfig>(config.model);
  DSLAUNCH_ASSIGN_OR_RETURN(
      std::unique_ptr<GptDeviceTraining> training,
      GptDeviceTraining::Create(gpt, static_cast<int>(config.batch.micro_batch_per_gpu),
                                std::make_unique<testing::HostCollectives>(world),
                                "device: cuda:" + std::to_string(*plan.device) + " (host stand-in), host collectives"));
  return std::unique_ptr<DeviceTraining>(std::move(training));
}

}  // namespace dslaunch::runtime
