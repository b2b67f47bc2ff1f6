#include "runtime/core/device_choice.h"

namespace dslaunch::runtime {

Result<int> DeviceForLocalRank(const LocalDeviceQuery& q) {
  const std::string who = "LOCAL_RANK " + std::to_string(q.local_rank) + " of LOCAL_WORLD_SIZE " +
                          std::to_string(q.local_world_size);
  if (q.local_world_size <= 0 || q.local_rank < 0 || q.local_rank >= q.local_world_size) {
    return InvalidArgumentError(who + ": not a local rank");
  }
  if (q.local_world_size > q.visible_devices) {
    const std::string visible = q.cuda_visible_devices ? "CUDA_VISIBLE_DEVICES='" + *q.cuda_visible_devices + "'"
                                                       : "CUDA_VISIBLE_DEVICES unset";
    return FailedPreconditionError(
        who + ": this node's " + std::to_string(q.local_world_size) + " workers need one GPU each, and this process sees " +
        std::to_string(q.visible_devices) + " (" + visible +
        "); start at most that many workers per node (hostfile slots, --num_gpus, --include) or train on the CPU");
  }
  return q.local_rank;
}

}  // namespace dslaunch::runtime
