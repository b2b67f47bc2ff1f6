#include "runtime/train/device_plan.h"

#include <variant>

#include "runtime/core/device_choice.h"

namespace dslaunch::runtime {
namespace {

// What the device does not train yet, as the train.json key that asks for it; empty when nothing.
std::string Unsupported(const TrainConfig& config) {
  const auto* gpt = std::get_if<GptConfig>(&config.model);
  if (gpt == nullptr) return "model.type (the device trains the gpt model only)";
  if (gpt->recompute_blocks > 0) return "activation_checkpointing (no recomputation on the device yet)";
  if (config.pipeline.stages > 1) return "pipeline.stages (no pipeline parallelism on the device yet)";
  if (config.tensor_parallel.size > 1) return "tensor_parallel (no tensor parallelism on the device yet)";
  return "";
}

}  // namespace

Result<DevicePlan> PlanDevice(const TrainConfig& config, const WorkerIdentity& id, int visible_devices,
                              const std::string& count_error, const std::optional<std::string>& cuda_visible_devices) {
  DevicePlan plan;
  if (config.device == TrainDevice::kCpu) return plan;
  const bool asked = config.device == TrainDevice::kCuda;
  if (visible_devices <= 0) {
    const std::string why = "no CUDA device visible" + (count_error.empty() ? "" : " (" + count_error + ")") +
                            ", CUDA_VISIBLE_DEVICES " +
                            (cuda_visible_devices ? "\"" + *cuda_visible_devices + "\"" : std::string("unset"));
    if (asked) return FailedPreconditionError("device \"cuda\": " + why + "; \"device\": \"cpu\" trains on the CPU");
    if (id.local_rank == 0) plan.line = "device: auto: " + why + "; training on the CPU";
    return plan;
  }
  if (const std::string key = Unsupported(config); !key.empty()) {
    if (asked) return FailedPreconditionError("device \"cuda\": " + key + "; \"device\": \"cpu\" trains it on the CPU");
    if (id.local_rank == 0) plan.line = "device: auto: " + key + "; training on the CPU";
    return plan;
  }
  DSLAUNCH_ASSIGN_OR_RETURN(plan.device,
                            DeviceForLocalRank({id.local_rank, id.local_world_size, visible_devices, cuda_visible_devices}));
  return plan;
}

Result<DevicePlan> AgreeOnDevice(Communicator& world, DevicePlan plan) {
  float on_device = plan.device ? 1.0f : 0.0f;
  DSLAUNCH_RETURN_IF_ERROR(world.AllReduce(std::span<float>(&on_device, 1), ReduceOp::kSum)
                               .WithContext("agreeing on the device"));
  const int ranks = static_cast<int>(on_device);
  if (ranks == world.world_size() || !plan.device) return plan;
  plan.device.reset();
  if (world.rank() == 0) {
    plan.line = "device: auto: " + std::to_string(world.world_size() - ranks) + " of " +
                std::to_string(world.world_size()) + " ranks have no device; every rank trains on the CPU";
  }
  return plan;
}

Result<std::optional<int>> ChooseDevice(const TrainConfig& config, const WorkerIdentity& id,
                                        const std::map<std::string, std::string>& env, int visible_devices,
                                        const std::string& count_error, Communicator& world,
                                        std::vector<std::string>& lines) {
  std::optional<std::string> visible;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) visible = it->second;
  DSLAUNCH_ASSIGN_OR_RETURN(DevicePlan plan, PlanDevice(config, id, visible_devices, count_error, visible));
  DSLAUNCH_ASSIGN_OR_RETURN(plan, AgreeOnDevice(world, std::move(plan)));
  if (!plan.line.empty()) lines.push_back(plan.line);
  return plan.device;
}

}  // namespace dslaunch::runtime
