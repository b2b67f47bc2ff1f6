// DeviceTraining: training on an accelerator, handed to Train by a worker built for one (the CUDA
// worker, runtime/train/cuda/gpt_device_training.h; docs/gpu.md, "Training on the device"). The loop
// is the same; these calls replace the CPU's wherever the parameters are touched: the engine (its
// state on the device), the step's micro-steps, the validation batches and the sample run the
// device model on the task's token batches (TrainTask::TrainBatch, ValidationBatch). Everything
// else (data, checkpoints, snapshots, reports, the loss all-reduce on Train's communicator) is the
// CPU run's. This header knows no CUDA type: the trainer stays a CPU library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "runtime/core/initial_values.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_options.h"
#include "runtime/train/train_task.h"

namespace dslaunch::runtime {

class DeviceTraining {
 public:
  virtual ~DeviceTraining() = default;
  // The log's line for this rank's device, e.g. "device: cuda:0 (NVIDIA H200), NCCL".
  virtual std::string Describe() const = 0;
  // The engine on the device for the task's layout, its parameters from `initial`. Called once,
  // before the others; the engine returned must outlive the calls below.
  virtual Result<std::unique_ptr<Engine>> CreateEngine(const ParameterLayout& layout, const EngineOptions& options,
                                                       const InitialValues& initial) = 0;
  // The step's `micro_steps` forward and backward passes on this rank's micro-batches of `step`
  // (each loss x `scale` in backward); the sum of their mean losses.
  virtual Result<double> TrainMicroSteps(TrainTask& task, int64_t step, int micro_steps, float scale) = 0;
  // The mean loss of this rank's validation batch `batch`.
  virtual Result<float> ValidationLoss(TrainTask& task, int64_t batch) = 0;
  // The end-of-run sample (TrainTask::Sample's text), drawn from the device model's logits.
  virtual Result<std::string> Sample(const std::string& prompt, int count, uint64_t seed) = 0;
};

}  // namespace dslaunch::runtime
