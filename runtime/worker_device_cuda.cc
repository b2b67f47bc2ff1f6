// dslaunch-worker-cuda's device (runtime/worker_device.h): the local rank's GPU, an NCCL group of
// the world formed through the store, and the device GPT over the device engine.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>

#include "runtime/comm/nccl/communicator.h"
#include "runtime/train/cuda/gpt_device_training.h"
#include "runtime/train/device_plan.h"
#include "runtime/worker_device.h"

namespace dslaunch::runtime {

Status PrepareDevice(const TrainConfig&, const WorkerIdentity&, const std::map<std::string, std::string>&,
                     const std::vector<std::string>&, std::vector<std::string>&) {
  return Status::Ok();  // this is the CUDA worker: StartDevice decides
}

Result<std::unique_ptr<DeviceTraining>> StartDevice(const TrainConfig& config, const WorkerIdentity& id,
                                                    const std::map<std::string, std::string>& env, StoreClient& store,
                                                    Communicator& world, std::vector<std::string>& lines) {
  int count = 0;
  std::string count_error;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    count = 0;
    count_error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(const std::optional<int> device,
                            ChooseDevice(config, id, env, count, count_error, world, lines));
  if (!device) return std::unique_ptr<DeviceTraining>();
  if (const cudaError_t rc = cudaSetDevice(*device); rc != cudaSuccess) {
    return InternalError("cudaSetDevice(" + std::to_string(*device) + "): " + cudaGetErrorString(rc));
  }
  cudaDeviceProp prop{};
  const std::string name =
      cudaGetDeviceProperties(&prop, *device) == cudaSuccess ? std::string(prop.name) : std::string("?");
  NcclOptions options;
  options.device = *device;
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl,
                            NcclCommunicator::Create(store, id.rank, id.world_size, options));
  int version = 0;
  ncclGetVersion(&version);
  const std::string description = "device: cuda:" + std::to_string(*device) + " (" + name + "), NCCL " +
                                  std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                                  std::to_string(version % 100);
  return GptDeviceTraining::Create(config, std::move(nccl), description);
}

}  // namespace dslaunch::runtime
