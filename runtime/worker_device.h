// The worker's device (train.json's "device": docs/gpu.md, "Training on the device"), a seam chosen
// at link time, so that dslaunch-worker links no CUDA library and runs where there is no driver:
//   runtime/worker_device_cpu.cc   dslaunch-worker: no device of its own; re-executes the CUDA
//                                  worker (dslaunch-worker-cuda beside it, or DSLAUNCH_CUDA_WORKER)
//                                  where the config asks for the GPU, or may use one ("auto");
//   runtime/worker_device_cuda.cc  dslaunch-worker-cuda: the rank's GPU, NCCL, the device model;
//   tests/programs/worker_device_stand_in.cc  the CUDA worker's path on the host stand-ins of
//                                  CUDA and NCCL, for the proc tier without a GPU.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/store/store_client.h"
#include "common/worker_identity.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/train_config.h"
#include "runtime/train/device_training.h"

namespace dslaunch::runtime {

// The variable naming the CUDA worker to re-execute (tests; a build laid out otherwise).
inline constexpr char kCudaWorkerEnv[] = "DSLAUNCH_CUDA_WORKER";
// Its file name beside dslaunch-worker.
inline constexpr char kCudaWorkerName[] = "dslaunch-worker-cuda";

// Early, before any group forms: what this process does about config.device. OK to go on in this
// process (a line for the log may be added to `lines`); a worker that hands over re-executes
// `command` and returns only with the reason the exec failed. kFailedPrecondition, naming "device"
// and what to do, where the config asks for what this worker cannot give.
Status PrepareDevice(const TrainConfig& config, const WorkerIdentity& id, const std::map<std::string, std::string>& env,
                     const std::vector<std::string>& command, std::vector<std::string>& lines);

// After the world's group formed through `store`: this rank's training on its device, or null to
// train on the CPU (a line in `lines` says why where the config left it open). `world` is the
// CPU communicator of the whole group (for a stand-in's collectives).
Result<std::unique_ptr<DeviceTraining>> StartDevice(const TrainConfig& config, const WorkerIdentity& id,
                                                    const std::map<std::string, std::string>& env, StoreClient& store,
                                                    Communicator& world, std::vector<std::string>& lines);

}  // namespace dslaunch::runtime
