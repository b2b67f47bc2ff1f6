// Streams of the host stand-in of CUDA (tests/fakes/host_cuda.cc): each stream a queue of the work
// enqueued on it, run in order, and a choice of WHEN it runs, so that the host tests can find an
// ordering the code forgot (a collective that reads a buffer before the kernels that write it have
// run, a kernel that reuses a buffer a collective still reads):
//   kImmediate     every stream runs its work when it is enqueued (the default: one order);
//   kCommFirst     the communication streams run at once, the others only when made to (a
//                  synchronization, a copy to the host, another stream waiting for them): work a
//                  collective does not wait for has not happened yet;
//   kComputeFirst  the other way round: a collective runs only when something waits for it.
// A stream made to run by another's wait (HostOrderAfter) runs up to the point recorded then.
// The state is per thread (each rank of a test is a thread); the order is global.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace dslaunch::runtime::testing {

enum class HostStreamOrder { kImmediate, kCommFirst, kComputeFirst };

void SetHostStreamOrder(HostStreamOrder order);

// A new stream of this thread; `communication`: the collectives' stream (HostCollectives's).
cudaStream_t NewHostStream(bool communication);
// Enqueues `work` on `stream` (nullptr: the default stream, which runs at once).
void RunOnHostStream(cudaStream_t stream, std::function<void()> work);
// Runs everything enqueued on `stream` so far.
void DrainHostStream(cudaStream_t stream);
// The work enqueued from now on on `consumer` waits for what was enqueued on `producer` so far.
void HostOrderAfter(cudaStream_t consumer, cudaStream_t producer);

}  // namespace dslaunch::runtime::testing
