// How a model on a CUDA device reaches its parameters and gradients: the device twin of
// runtime/core/parameter_access.h, group by group, with device pointers of element type T.
//
// The seam where the device engine's ZeRO lives (runtime/engine/cuda/device_engine.h): stages 0-2
// hand out the resident group, stage 3 all-gathers it on Acquire and frees it on Release, stages
// 1-3 reduce a group's gradient once it is ready, on the communication stream. Every kernel the
// model enqueues on these buffers runs on the compute stream the access was made for; the access
// orders its own copies and collectives against that stream, so the model never synchronizes.
//
// Unlike ParameterAccess, each call returns its failure (a gather or a launch that failed): the
// device model's calls return a Status anyway.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "runtime/core/param_layout.h"

namespace dslaunch::runtime {

template <typename T>
class DeviceParameterAccess {
 public:
  virtual ~DeviceParameterAccess() = default;
  // The group's parameters (device, its whole slice), valid until the matching Release. A group
  // may be acquired several times per step (the tied embedding: input and output).
  virtual Result<const T*> Acquire(int group) = 0;
  virtual void Release(int group) = 0;
  // Where the backward pass accumulates (+=) the group's gradient for the current micro-step
  // (device, the group's numel elements).
  virtual Result<T*> Gradient(int group) = 0;
  // The backward pass has enqueued everything that writes the group's gradient in this
  // micro-step.
  virtual Status GradientReady(int group) = 0;
};

// One flat device buffer of parameters and one of gradients in the layout's order: no engine, no
// reduction (the benchmark and the model's own tests). Both buffers are the caller's.
template <typename T>
class FlatDeviceParameters final : public DeviceParameterAccess<T> {
 public:
  FlatDeviceParameters(const ParameterLayout& layout, const T* params, T* grads)
      : layout_(layout), params_(params), grads_(grads) {}

  Result<const T*> Acquire(int group) override {
    if (params_ == nullptr) return InvalidArgumentError("FlatDeviceParameters: no parameter buffer");
    return params_ + Offset(group);
  }
  void Release(int) override {}
  Result<T*> Gradient(int group) override {
    if (grads_ == nullptr) return InvalidArgumentError("FlatDeviceParameters: no gradient buffer");
    return grads_ + Offset(group);
  }
  Status GradientReady(int) override { return Status::Ok(); }

 private:
  size_t Offset(int group) const { return layout_.groups()[static_cast<size_t>(group)].offset; }

  const ParameterLayout& layout_;
  const T* params_;
  T* grads_;
};

}  // namespace dslaunch::runtime
