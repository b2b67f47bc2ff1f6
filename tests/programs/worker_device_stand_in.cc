// The CUDA worker's device (runtime/worker_device.h) on the host stand-ins: linked with
// runtime/worker_main.cc, the device GPT, the device engine and tests/fakes/host_cuda.cc, it is
// dslaunch-worker-cuda with device memory in host memory and the collectives on the world's Gloo
// group (tests/fakes/host_collectives.h). Every local rank has a "device" of its own. The proc tier
// runs `dslaunch` with "device": "cuda" through it (tests/runtime/worker_device_proc_test.cc).
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
  DSLAUNCH_ASSIGN_OR_RETURN(const std::optional<int> device,
                            ChooseDevice(config, id, env, id.local_world_size, "", world, lines));
  if (!device) return std::unique_ptr<DeviceTraining>();
  return GptDeviceTraining::Create(config, std::make_unique<testing::HostCollectives>(world),
                                   "device: cuda:" + std::to_string(*device) + " (host stand-in), host collectives");
}

}  // namespace dslaunch::runtime
