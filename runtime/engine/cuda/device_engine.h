// DeviceEngine: the Engine (runtime/engine/engine.h) with its state in CUDA device memory, for a
// model on the device (runtime/models/cuda/gpt.h) that reaches it through DeviceParameterAccess.
// Design: docs/gpu.md, "The engine on the device".
//
// The same ZeRO stages 0-3 as ZeroEngine, the same arithmetic in the same order, so that on the
// host stand-ins of CUDA and NCCL (tests/fakes/host_cuda.cc, tests/fakes/host_collectives.h) its
// losses and checkpoints are ZeroEngine's bit for bit:
//   parameters: in their storage type S (fp32, fp16, bf16), whole on every rank (stages 0-2) or the
//     owned slice (stage 3: Acquire all-gathers the group on the communication stream into a
//     pooled buffer, Release returns it); the model reads an fp32 copy of 16-bit storage, as the
//     CPU model does (it computes in fp32 whatever the storage);
//   gradients: the model's fp32 micro-step gradient is added into the S gradient with one rounding
//     when ready (stages 0-1), or reduce-scattered (average) on the communication stream while
//     backward goes on and this rank's part added into its S slice (stages 2-3); stage 1
//     reduce-scatters during the last micro-step's backward, stage 0 all-reduces at the step;
//   optimizer state: fp32 master weights (the owned parameters themselves for fp32 storage) and
//     Adam's moments of the owned slice, updated by the fused AdamUpdate kernel, which also writes
//     the 16-bit working copy; stages 1-2 then all-gather the parameters.
// The step's decisions (overflow, loss scale, clipping) are ZeroEngine's own (step_rules.h); the
// norm is a device reduction; checkpoints and snapshots stream the owned state through host
// memory in today's format, and Restore reads any checkpoint, so a run moves between CPU and GPU.
//
// Not supported yet (Create says so): SGD (Adam and AdamW only), offload_optimizer and
// offload_param, a model split over pipeline or tensor ranks (SetModelParallelGroups with groups),
// stage 3's persistence threshold and prefetch (every group is gathered when acquired).
//
// Streams: the model's kernels run on `compute`; collectives, and the kernels that consume their
// results, on the communicator's stream, ordered against `compute` by events. Step() waits for
// both. Not thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "common/status.h"
#include "runtime/comm/device_collectives.h"
#include "runtime/core/initial_values.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_options.h"
#include "runtime/models/cuda/device_parameter_access.h"

namespace dslaunch::runtime {

class DeviceEngine : public Engine {
 public:
  // The engine on the current CUDA device for `layout`, its group `comm` (which must outlive it),
  // the model's kernels on `compute`. Fails with Engine::Create's errors for bad options, with
  // kFailedPrecondition naming the train.json key for what the device engine does not do yet, and with
  // kInternal naming the buffer when device memory runs out.
  static Result<std::unique_ptr<DeviceEngine>> Create(const ParameterLayout& layout, DeviceCollectives& comm,
                                                      const EngineOptions& options, const InitialValues& initial,
                                                      cudaStream_t compute);

  // The device bytes Create allocates for rank `rank` of `world`, by part, counted without
  // allocating (the memory check before it, runtime/train/cuda/gpt_device_training.h). `working`
  // includes stage 3's gather buffers for one group at a time, which Acquire allocates on first
  // use (GptCuda holds one group at a time).
  static MemoryStats PlanBytes(const ParameterLayout& layout, const EngineOptions& options, int world, int rank);

  // The parameters and gradients for the model on the device, in fp32.
  virtual DeviceParameterAccess<float>& device_access() = 0;
  // Device bytes the engine holds now (parameters, gradients, optimizer state, buffers).
  virtual size_t device_bytes() const = 0;
};

}  // namespace dslaunch::runtime
