// Which CUDA device a worker uses (docs/gpu.md, "One GPU per local rank"). Pure: the caller reads
// LOCAL_RANK, LOCAL_WORLD_SIZE and CUDA_VISIBLE_DEVICES at the edge and asks the CUDA runtime (or
// NVML) how many devices this process sees.
//
// The launcher gives every worker of a node the node's slots as CUDA_VISIBLE_DEVICES
// (launcher/plan/env_contract.h), so each worker sees all of the node's GPUs, renumbered from 0, and
// takes device LOCAL_RANK among them: torchrun's and DeepSpeed's convention
// (torch.cuda.set_device(local_rank)). Sharing a GPU between ranks is refused: NCCL does not
// support two ranks of one communicator on one device.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace dslaunch::runtime {

struct LocalDeviceQuery {
  int local_rank = 0;
  int local_world_size = 1;
  int visible_devices = 0;  // devices this process sees (cudaGetDeviceCount)
  // The worker's CUDA_VISIBLE_DEVICES, for the message; nullopt when unset.
  std::optional<std::string> cuda_visible_devices;
};

// The device ordinal for `query.local_rank`. kInvalidArgument for a local rank outside
// [0, local_world_size); kFailedPrecondition, naming LOCAL_RANK, the device count and
// CUDA_VISIBLE_DEVICES, when the node's workers outnumber its devices (no device at all included).
Result<int> DeviceForLocalRank(const LocalDeviceQuery& query);

}  // namespace dslaunch::runtime
