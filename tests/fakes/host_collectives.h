// DeviceCollectives (runtime/comm/device_collectives.h) over a host Communicator, for the device
// engine on the host stand-in of CUDA (tests/fakes/host_cuda.cc), where device memory is host
// memory and every "kernel" has run by the time its launcher returns: each enqueued collective runs
// at once through the communicator, and the ordering calls have nothing to order. They are
// counted, so that a test sees the engine ask for them.
#pragma once

#include "runtime/comm/device_collectives.h"

namespace dslaunch::runtime::testing {

class HostCollectives final : public DeviceCollectives {
 public:
  explicit HostCollectives(Communicator& comm) : comm_(comm) {}

  Communicator& communicator() override { return comm_; }
  cudaStream_t stream() const override { return nullptr; }
  Status OrderAfter(cudaStream_t) override {
    ++order_after;
    return Status::Ok();
  }
  Status OrderBefore(cudaStream_t) override {
    ++order_before;
    return Status::Ok();
  }
  Status EnqueueAllReduce(BufferView data, ReduceOp op) override { return comm_.AllReduce(data, op); }
  Status EnqueueReduceScatter(ConstBufferView input, BufferView output,
                              const std::vector<size_t>& counts, ReduceOp op) override {
    return comm_.ReduceScatter(input, output, counts, op);
  }
  Status EnqueueAllGather(ConstBufferView input, BufferView output,
                          const std::vector<size_t>& counts) override {
    return comm_.AllGather(input, output, counts);
  }
  Status Synchronize(std::string_view) override {
    ++synchronizations;
    return Status::Ok();
  }

  int order_after = 0;
  int order_before = 0;
  int synchronizations = 0;

 private:
  Communicator& comm_;
};

}  // namespace dslaunch::runtime::testing
