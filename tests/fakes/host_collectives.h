// DeviceCollectives (runtime/comm/device_collectives.h) over a host Communicator, for the device
// engine on the host stand-in of CUDA (tests/fakes/host_cuda.cc), where device memory is host
// memory: each collective is work on a stream of its own (tests/fakes/host_streams.h), run when the
// stream's order says, through the communicator; OrderAfter and OrderBefore make one stream's work
// wait for the other's, as CUDA events do. Under HostStreamOrder::kCommFirst a collective the
// engine did not order after the compute stream reads its buffer before the kernels that write it
// have run; under kComputeFirst a kernel the engine did not order after a collective overwrites
// what the collective has not read yet. A collective's failure is returned by Synchronize.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/comm/device_collectives.h"
#include "tests/fakes/host_streams.h"

namespace dslaunch::runtime::testing {

class HostCollectives final : public DeviceCollectives {
 public:
  explicit HostCollectives(Communicator& comm) : comm_(comm), stream_(NewHostStream(/*communication=*/true)) {}

  Communicator& communicator() override { return comm_; }
  cudaStream_t stream() const override { return stream_; }
  Status OrderAfter(cudaStream_t producer) override {
    HostOrderAfter(stream_, producer);
    return Status::Ok();
  }
  Status OrderBefore(cudaStream_t consumer) override {
    HostOrderAfter(consumer, stream_);
    return Status::Ok();
  }
  Status EnqueueAllReduce(BufferView data, ReduceOp op) override {
    RunOnHostStream(stream_, [=, this] { Keep(comm_.AllReduce(data, op)); });
    return Status::Ok();
  }
  Status EnqueueReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                              ReduceOp op) override {
    RunOnHostStream(stream_, [=, this] { Keep(comm_.ReduceScatter(input, output, counts, op)); });
    return Status::Ok();
  }
  Status EnqueueAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override {
    RunOnHostStream(stream_, [=, this] { Keep(comm_.AllGather(input, output, counts)); });
    return Status::Ok();
  }
  Status Synchronize(std::string_view) override {
    DrainHostStream(stream_);
    return failure_;
  }

 private:
  void Keep(const Status& s) {
    if (failure_.ok() && !s.ok()) failure_ = s;
  }

  Communicator& comm_;
  cudaStream_t stream_;
  Status failure_;
};

}  // namespace dslaunch::runtime::testing
