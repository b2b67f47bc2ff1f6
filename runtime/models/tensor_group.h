// TensorGroup: the collectives a tensor-parallel model part makes inside its forward and backward
// (docs/parallelism.md, "Tensor parallelism"). The model defines what it needs; the training
// loop adapts its tensor group's communicator to it (runtime/train/pipeline_stage.h), so models
// stay below the communicators (docs/source-layout.md).
//
// Collective over the group: every rank makes the same calls in the same order with the same
// sizes. The results are the same bits on every rank. A failure is the communicator's (a peer
// gone, a timeout); the model keeps the first one (GptModel::status()).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

class TensorGroup {
 public:
  virtual ~TensorGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Element-wise sum (Max: maximum) over the group, in place.
  virtual Status Sum(std::span<float> data) = 0;
  virtual Status Max(std::span<float> data) = 0;
  // Every rank's `input` (counts[r] values from rank r) into `output`, in rank order.
  virtual Status Gather(std::span<const float> input, std::span<float> output, const std::vector<size_t>& counts) = 0;
};

}  // namespace dslaunch::runtime
