// A scripted stand-in for the NCCL and CUDA runtime calls of runtime/comm/nccl/communicator.cc,
// linked instead of libnccl and libcudart (tests/fakes/fake_nccl.cc). It lets the proc tier drive
// NcclCommunicator's own logic without a GPU: the initialisation that never finishes, the stream
// that never drains, an error NCCL reports, the per-block calls of uneven counts. The collectives
// move no data; they are recorded. The kernels' and NCCL's real behaviour is the gpu tier's.
//
// One script per process (the C API has nowhere else to keep it): a test resets it first. Not
// thread-safe but for RequestAbort's flag, which the communicator keeps itself.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

namespace dslaunch::testing {

struct FakeNcclCall {
  std::string function;  // "ncclReduce", "ncclGroupStart", ...
  const void* send = nullptr;
  const void* receive = nullptr;
  size_t count = 0;
  int root = -1;
};

struct FakeNcclScript {
  int device_count = 1;
  // ncclCommGetAsyncError reports ncclInProgress this many times after ncclCommInitRankConfig
  // (-1: forever), then init_result.
  int init_polls_in_progress = 0;
  ncclResult_t init_result = ncclSuccess;
  // cudaStreamQuery answers cudaErrorNotReady for ever.
  bool stream_never_done = false;
  // Once the group has formed, ncclCommGetAsyncError reports this (e.g. ncclRemoteError).
  ncclResult_t async_error = ncclSuccess;

  // What happened.
  std::vector<FakeNcclCall> calls;
  int aborts = 0;
  int finalizes = 0;
  int destroys = 0;
};

// The script, reset to its defaults by ResetFakeNccl.
FakeNcclScript& FakeNccl();
void ResetFakeNccl();
// The calls named `function`, in order.
std::vector<FakeNcclCall> FakeNcclCalls(const std::string& function);

}  // namespace dslaunch::testing
