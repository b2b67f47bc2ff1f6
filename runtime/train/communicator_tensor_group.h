// The tensor group of a tensor-parallel model part (runtime/models/tensor_group.h) over a
// Communicator: the grid's tensor group (docs/parallelism.md, "Tensor parallelism"). Each failure
// names what the model was doing. Not thread-safe, as the communicator.
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/models/tensor_group.h"

namespace dslaunch::runtime {

class CommunicatorTensorGroup final : public TensorGroup {
 public:
  // `comm` must outlive this.
  explicit CommunicatorTensorGroup(Communicator& comm) : comm_(comm) {}

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.world_size(); }
  Status Sum(std::span<float> data) override {
    return comm_.AllReduce(data, ReduceOp::kSum).WithContext("tensor-parallel sum");
  }
  Status Max(std::span<float> data) override {
    return comm_.AllReduce(data, ReduceOp::kMax).WithContext("tensor-parallel maximum");
  }
  Status Gather(std::span<const float> input, std::span<float> output, const std::vector<size_t>& counts) override {
    return comm_.AllGather(input, output, counts).WithContext("tensor-parallel gather");
  }

 private:
  Communicator& comm_;
};

}  // namespace dslaunch::runtime
