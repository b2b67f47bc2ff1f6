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
  std::optional<std::string> visible;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) visible = it->second;
  DSLAUNCH_ASSIGN_OR_RETURN(DevicePlan plan, PlanDevice(config, id, count, count_error, visible));
  DSLAUNCH_ASSIGN_OR_RETURN(plan, AgreeOnDevice(world, std::move(plan)));
  if (!plan.line.empty()) lines.push_back(plan.line);
  if (!plan.device) return std::unique_ptr<DeviceTraining>();
  if (const cudaError_t rc = cudaSetDevice(*plan.device); rc != cudaSuccess) {
    return InternalError("cudaSetDevice(" + std::to_string(*plan.device) + "): " + cudaGetErrorString(rc));
  }
  cudaDeviceProp prop{};
  const std::string name =
      cudaGetDeviceProperties(&prop, *plan.device) == cudaSuccess ? std::string(prop.name) : std::string("?");
  NcclOptions options;
  options.device = *plan.device;
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl,
                            NcclCommunicator::Create(store, id.rank, id.world_size, options));
  int version = 0;
  ncclGetVersion(&version);
  const std::string description = "device: cuda:" + std::to_string(*plan.device) + " (" + name + "), NCCL " +
                                  std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                                  std::to_string(version % 100);
  const auto& gpt = std::get<GptConfig>(config.model);
  DSLAUNCH_ASSIGN_OR_RETURN(
      std::unique_ptr<GptDeviceTraining> training,
      GptDeviceTraining::Create(gpt, static_cast<int>(config.batch.micro_batch_per_gpu), std::move(nccl), description));
  return std::unique_ptr<DeviceTraining>(std::move(training));
}

}  // namespace dslaunch::runtime
