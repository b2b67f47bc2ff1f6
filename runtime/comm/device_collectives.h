// DeviceCollectives: collectives on device memory, enqueued on a communication stream and ordered
// against the caller's compute stream by events, so that a reduction runs while the compute stream
// goes on (docs/gpu.md, "The engine on the device"). The device engine's view of its communicator:
// NcclCommunicator (runtime/comm/nccl/communicator.h) on a GPU; in the tests without one, an
// adapter that runs each call at once on a host Communicator (tests/fakes/host_collectives.h).
//
// Every buffer is device memory; the arguments are those of the Communicator calls of the same
// names, and every rank must enqueue the same collectives in the same order.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"

namespace dslaunch::runtime {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;

  // The same group through the blocking calls (each returns when its buffers are done with), and
  // its rank and size.
  virtual Communicator& communicator() = 0;
  // The stream the collectives run on: a kernel that consumes a collective's output without the
  // host waiting is enqueued here.
  virtual cudaStream_t stream() const = 0;
  // The collectives enqueued from now on wait for the work enqueued so far on `producer`.
  virtual Status OrderAfter(cudaStream_t producer) = 0;
  // The work enqueued from now on on `consumer` waits for everything enqueued so far on stream().
  virtual Status OrderBefore(cudaStream_t consumer) = 0;
  virtual Status EnqueueAllReduce(BufferView data, ReduceOp op) = 0;
  virtual Status EnqueueReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                                      ReduceOp op) = 0;
  virtual Status EnqueueAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) = 0;
  // Waits until stream() has finished everything enqueued on it (with the communicator's stop,
  // abort and timeout checks); `what` names the wait in an error.
  virtual Status Synchronize(std::string_view what) = 0;
};

}  // namespace dslaunch::runtime
