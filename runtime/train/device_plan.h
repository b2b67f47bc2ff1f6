// Where a worker built with CUDA trains, from train.json's "device" and the devices it sees: the
// rules of docs/gpu.md, "Training on the device", as a pure function (the CUDA worker and its host
// stand-in both call it; tests/runtime/train/device_plan_test.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/worker_identity.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

struct DevicePlan {
  std::optional<int> device;  // the CUDA ordinal to train on; nullopt: the CPU
  std::string line;           // why the CPU where "auto" could have meant the GPU; else empty
};

// "cpu": the CPU. No device visible (`visible_devices` 0, `count_error` CUDA's reason or empty):
// "auto" the CPU with a line, "cuda" kFailedPrecondition naming the reason and
// CUDA_VISIBLE_DEVICES. A run the device does not train yet (the mlp model, recomputation, pipeline
// or tensor parallelism): "auto" the CPU with a line, "cuda" kFailedPrecondition naming the key. Otherwise
// the local rank's device (DeviceForLocalRank: one GPU per local rank, its errors as they are).
Result<DevicePlan> PlanDevice(const TrainConfig& config, const WorkerIdentity& id, int visible_devices,
                              const std::string& count_error, const std::optional<std::string>& cuda_visible_devices);

// Collective over the whole world, after each rank's PlanDevice: every rank trains on its device,
// or every rank on the CPU (the engines must match, and NCCL needs every rank). `plan` is this
// rank's; where some rank has no device, a rank that has one gives it up with a line (rank 0's
// only). Fails as the all-reduce does.
Result<DevicePlan> AgreeOnDevice(Communicator& world, DevicePlan plan);

// Collective: what a worker built with CUDA does, given the `visible_devices` it sees
// (`count_error`: CUDA's reason when it sees none): PlanDevice with the worker's
// CUDA_VISIBLE_DEVICES from `env`, then AgreeOnDevice. The plan's line, if any, goes to `lines`;
// the CUDA ordinal to train on, or nullopt for the CPU.
Result<std::optional<int>> ChooseDevice(const TrainConfig& config, const WorkerIdentity& id,
                                        const std::map<std::string, std::string>& env, int visible_devices,
                                        const std::string& count_error, Communicator& world,
                                        std::vector<std::string>& lines);

}  // namespace dslaunch::runtime
