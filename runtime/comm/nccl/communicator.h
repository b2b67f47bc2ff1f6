// NcclCommunicator: the GPU Communicator over NCCL (docs/communicator.md, "NCCL"; docs/gpu.md).
//
// Bootstrap: rank 0 makes the ncclUniqueId and every rank reads it through dslaunch's store
// (runtime/comm/nccl/unique_id_exchange.h, under "gen/<generation>/nccl/ctx<id>/"); then every
// rank calls ncclCommInitRankConfig in NON-BLOCKING mode and polls it, so that forming the group
// is bounded by NcclOptions::init_timeout and ends at once when the stop flag is set.
//
// Buffers: every BufferView is DEVICE memory of this communicator's device (a host pointer is
// refused with kInvalidArgument). Collectives run on the communicator's own stream(), ordered
// after the caller's compute stream with an event (OrderAfter), so that a reduction starts only
// once the kernels that produced its buffer are done.
//
// Two ways to call:
//  - the Communicator interface (AllReduce, ReduceScatter, ...): enqueue, then wait until the
//    stream has finished it; the call returns when this rank's part is done, as Gloo's do;
//  - Enqueue* between BeginGroup/EndGroup, then Synchronize: the engine's buckets, reduced while
//    backward goes on (the caller orders each bucket after the kernel that filled it with
//    OrderAfter, and waits once for all of them).
// Uneven counts: ReduceScatter and AllGather with equal counts are ncclReduceScatter and
// ncclAllGather; uneven ones are one ncclReduce / ncclBroadcast per rank inside one group.
//
// Waiting never blocks inside CUDA or NCCL: it polls the stream and ncclCommGetAsyncError, and
// between polls looks at the stop flag (the agent's SIGTERM), RequestAbort (a watchdog thread) and
// the collective timeout. Any of them calls ncclCommAbort on this thread and makes the call and
// every later one return kAborted, so no rank sits in a collective after the job decided to stop.
// A peer that died makes NCCL report an error (kAborted with NCCL's message) or, where NCCL hangs
// instead, the collective timeout fires.
//
// Thread-safety: one thread makes the calls; RequestAbort may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/store/store_client.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/device_collectives.h"
#include "runtime/comm/nccl/poll.h"
#include "runtime/comm/nccl/unique_id_exchange.h"

typedef struct ncclComm* ncclComm_t;

namespace dslaunch::runtime {

// A healthy collective finishes in well under this even for GB-sized buffers; the same bound as
// Gloo's, since a stalled peer is what it catches.
inline constexpr std::chrono::milliseconds kDefaultNcclCollectiveTimeout{300000};

struct NcclOptions {
  int device = 0;      // CUDA device ordinal of this rank (DeviceForLocalRank)
  int context_id = 0;  // distinct per communicator within a generation
  std::chrono::milliseconds init_timeout = kDefaultNcclInitTimeout;
  std::chrono::milliseconds collective_timeout = kDefaultNcclCollectiveTimeout;
  // When set and true, the call in progress (and every later one) aborts: the worker's stop flag.
  const std::atomic<bool>* stop = nullptr;
};

class NcclCommunicator : public Communicator, public DeviceCollectives {
 public:
  // Forms the group. kInvalidArgument for a bad rank, world or device; kUnavailable when the id
  // exchange or NCCL's initialisation fails or does not finish within init_timeout (the NCCL
  // communicator is aborted first); kAborted when `stop` was set meanwhile. Messages name the rank,
  // the device and NCCL's own error text.
  static Result<std::unique_ptr<NcclCommunicator>> Create(StoreClient& store, int rank, int world,
                                                          NcclOptions options);
  // Finalizes and destroys a healthy communicator; aborts one that failed or was aborted.
  ~NcclCommunicator() override;

  std::string Describe() const override;
  bool CanReduce(DType dtype) const override;

  // Asks the collective in progress, or the next one, to abort (ncclCommAbort on the calling
  // thread of the collectives). Any thread; `reason` ends up in the kAborted message.
  void RequestAbort(const std::string& reason);

  void SetCollectiveTimeout(std::chrono::milliseconds timeout) { options_.collective_timeout = timeout; }
  int device() const { return options_.device; }

  // DeviceCollectives (runtime/comm/device_collectives.h): the device engine's calls.
  Communicator& communicator() override { return *this; }
  cudaStream_t stream() const override { return stream_; }
  // Makes the collectives enqueued from now on wait for the work enqueued so far on `producer`.
  Status OrderAfter(cudaStream_t producer) override;
  // Makes the work enqueued from now on on `consumer` wait for the collectives enqueued so far.
  Status OrderBefore(cudaStream_t consumer) override;

  // The asynchronous form, for buckets: collectives enqueued between BeginGroup and EndGroup are
  // launched together; Synchronize waits (with the same stop, abort and timeout checks) until the
  // stream has finished all of them. The arguments are checked as the Communicator methods check
  // theirs. Like every collective, these must be called in the same order on every rank.
  Status BeginGroup();
  Status EndGroup();
  Status EnqueueAllReduce(BufferView data, ReduceOp op) override;
  Status EnqueueReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                              ReduceOp op) override;
  Status EnqueueAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override;
  Status Synchronize(std::string_view what) override;

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override;
  Status DoReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                         ReduceOp op) override;
  Status DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override;
  Status DoBroadcast(BufferView data, int root) override;
  Status DoBarrier() override;
  // Not yet: NCCL's send and receive rendezvous on one stream, so a pipeline's buffered sends need
  // the device engine's streams (docs/gpu.md). kFailedPrecondition saying so.
  Status DoSend(ConstBufferView data, int peer) override;
  Status DoRecv(BufferView data, int peer) override;
  Status DoFlushSends() override;

 private:
  NcclCommunicator(int rank, int world, NcclOptions options, ncclComm_t comm, cudaStream_t stream,
                   cudaEvent_t order_event, cudaEvent_t done_event, float* barrier_scratch);

  // Checks that `data` is device memory of this device (kInvalidArgument otherwise).
  Status CheckDevicePointer(const void* data, std::string_view what) const;
  // Aborts NCCL (once) and records `status` as the communicator's health; returns it.
  Status Fail(Status status);
  // ncclGroupEnd/a collective returned `rc`: waits while NCCL reports ncclInProgress (non-blocking
  // mode), and turns an error into Fail(kAborted) naming `what`.
  Status Launched(int rc, std::string_view what);
  // The end of a wait for `what`: OK when it finished; otherwise Fail(kAborted) with the
  // operation's error, the abort's reason, or `timed_out`.
  Status Waited(const PollOutcome& outcome, std::string_view what, const std::string& timed_out);
  // Whether to abort now, and why ("" when not).
  std::string AbortReason() const;
  // Called before anything is issued for `what`: an abort already requested (or a stop) ends the
  // communicator here, so it is honoured even when the collective would have finished before the
  // first poll (a group of one on a real GPU does). Fail(kAborted) with the reason, else OK.
  Status NotAborting(std::string_view what);
  std::string Who() const;

  NcclOptions options_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t order_event_;  // OrderAfter: recorded on the producer, waited for by stream_
  cudaEvent_t done_event_;   // OrderBefore: recorded on stream_, waited for by the consumer
  float* barrier_scratch_;  // one float of device memory: Barrier is an all-reduce of it
  bool aborted_ = false;    // ncclCommAbort was called
  int group_depth_ = 0;     // BeginGroup calls not yet ended
  std::atomic<bool> abort_requested_{false};
  mutable std::mutex abort_mu_;
  std::string abort_reason_;  // guarded by abort_mu_
};

}  // namespace dslaunch::runtime
