// GptDeviceTraining: DeviceTraining (runtime/train/device_training.h) for the gpt model on one CUDA
// device: GptCuda<float> (runtime/models/cuda/gpt.h) over the DeviceEngine
// (runtime/engine/cuda/device_engine.h), the task's token batches copied to the device each
// micro-step, on a compute stream of its own. docs/gpu.md, "Training on the device".
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/device_collectives.h"
#include "runtime/config/train_config.h"
#include "runtime/engine/cuda/device_buffer.h"
#include "runtime/engine/cuda/device_engine.h"
#include "runtime/models/cuda/gpt.h"
#include "runtime/ops/cuda/cublaslt_context.h"
#include "runtime/train/device_training.h"

namespace dslaunch::runtime {

class GptDeviceTraining final : public DeviceTraining {
 public:
  // The run's gpt model (PlanDevice has checked it is one the device trains) for its micro-batch
  // on the current device, reducing over `collectives` (this rank's data-parallel group on device
  // memory; kept alive by the object). `description` is Describe()'s line. kInvalidArgument for a
  // config GptCuda refuses; kInternal naming what failed to allocate.
  static Result<std::unique_ptr<DeviceTraining>> Create(const TrainConfig& config,
                                                        std::unique_ptr<DeviceCollectives> collectives,
                                                        std::string description);
  ~GptDeviceTraining() override;

  std::string Describe() const override { return description_; }
  // The device engine, after checking that what it allocates (DeviceEngine::PlanBytes) fits the
  // device's free memory: kFailedPrecondition naming the bytes by part and what to change.
  Result<std::unique_ptr<Engine>> CreateEngine(const ParameterLayout& layout, const EngineOptions& options,
                                               const InitialValues& initial) override;
  Result<double> TrainMicroSteps(TrainTask& task, int64_t step, int micro_steps, float scale) override;
  Result<float> ValidationLoss(TrainTask& task, int64_t batch) override;
  Result<std::string> Sample(const std::string& prompt, int count, uint64_t seed) override;

 private:
  GptDeviceTraining(std::unique_ptr<DeviceCollectives> collectives, std::string description);
  // Forward on `tokens` and `targets` (rows x seq), copied to the device first; the mean loss.
  Result<float> Forward(const std::vector<int>& tokens, const std::vector<int>& targets, int rows, int seq);
  DeviceEngine& engine();
  Status CheckDeviceMemory(const ParameterLayout& layout, const EngineOptions& options) const;

  std::unique_ptr<DeviceCollectives> collectives_;
  std::string description_;
  cudaStream_t compute_ = nullptr;
  std::unique_ptr<ops::cuda::CublasLtContext> ctx_;
  std::unique_ptr<GptCuda<float>> model_;
  DeviceBuffer<int> tokens_, targets_;  // max_batch x block_size each
  DeviceEngine* engine_ = nullptr;      // CreateEngine's, owned by the caller
  std::vector<float> logits_;           // Sample: the last position's logits on the host
};

}  // namespace dslaunch::runtime
