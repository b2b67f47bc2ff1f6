#include "runtime/comm/nccl/communicator.h"

#include <nccl.h>

#include <algorithm>
#include <functional>

#include "common/text.h"

namespace dslaunch::runtime {
namespace {

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes, "the store record holds NCCL_UNIQUE_ID_BYTES");
static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes);

std::string NcclText(ncclResult_t rc, ncclComm_t comm) {
  std::string text = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += " (" + std::string(last) + ")";
  return text;
}

std::string CudaText(cudaError_t rc) { return std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc); }

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
      return ncclUint8;
  }
  DSLAUNCH_CHECK(false) << "unknown dtype";
  return ncclFloat32;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  DSLAUNCH_CHECK(false) << "unknown reduce op";
  return ncclSum;
}

bool AllEqual(const std::vector<size_t>& counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

// Polls with the real clock (runtime/comm/nccl/poll.h).
template <typename Done, typename AbortReason>
PollOutcome Poll(Done done, AbortReason abort_reason, std::chrono::steady_clock::time_point deadline) {
  SteadyPollClock clock;
  return PollUntil(clock, done, abort_reason, deadline);
}

// The communicator's state in non-blocking mode (ncclInProgress while a call is being issued), with
// a failure of the query itself reported as the state.
ncclResult_t AsyncState(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  if (ncclResult_t q = ncclCommGetAsyncError(comm, &state); q != ncclSuccess) return q;
  return state;
}

// Calls `call(r, offset)` for every rank r with a non-empty block (offset: the block's first element)
// inside one ncclGroupStart/End, so that the calls launch as one. Returns the first failure, or
// ncclGroupEnd's result (ncclInProgress in non-blocking mode).
template <typename Call>
ncclResult_t EachBlockInGroup(const std::vector<size_t>& counts, Call call) {
  if (ncclResult_t rc = ncclGroupStart(); rc != ncclSuccess) return rc;
  const std::vector<size_t> offsets = BlockOffsets(counts);
  ncclResult_t first = ncclSuccess;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    ncclResult_t rc = call(static_cast<int>(r), offsets[r]);
    if (first == ncclSuccess && rc != ncclSuccess && rc != ncclInProgress) first = rc;
  }
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int world, NcclOptions options, ncclComm_t comm, cudaStream_t stream,
                                   cudaEvent_t order_event, cudaEvent_t done_event, float* barrier_scratch)
    : Communicator(rank, world),
      options_(options),
      comm_(comm),
      stream_(stream),
      order_event_(order_event),
      done_event_(done_event),
      barrier_scratch_(barrier_scratch) {}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(StoreClient& store, int rank, int world,
                                                                    NcclOptions options) {
  const std::string who = "nccl rank " + std::to_string(rank) + "/" + std::to_string(world) + " on cuda:" +
                          std::to_string(options.device);
  if (world <= 0 || rank < 0 || rank >= world) return InvalidArgumentError(who + ": bad rank");
  int devices = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&devices); rc != cudaSuccess) {
    return UnavailableError(who + ": no usable CUDA device: " + CudaText(rc));
  }
  if (options.device < 0 || options.device >= devices) {
    return InvalidArgumentError(who + ": device out of range: this process sees " + std::to_string(devices) +
                                " device(s) (CUDA_VISIBLE_DEVICES)");
  }
  if (cudaError_t rc = cudaSetDevice(options.device); rc != cudaSuccess) {
    return UnavailableError(who + ": cudaSetDevice: " + CudaText(rc));
  }

  // The id: made by rank 0 (no GPU needed), read by the others through the store.
  const auto deadline = std::chrono::steady_clock::now() + options.init_timeout;
  UniqueIdExchangeOptions exchange{options.context_id, options.init_timeout, options.stop};
  Result<NcclUniqueIdBytes> id_bytes = ExchangeUniqueId(
      store, rank,
      []() -> Result<NcclUniqueIdBytes> {
        ncclUniqueId id;
        if (ncclResult_t rc = ncclGetUniqueId(&id); rc != ncclSuccess) {
          return UnavailableError(std::string("ncclGetUniqueId: ") + NcclText(rc, nullptr));
        }
        NcclUniqueIdBytes bytes;
        std::copy(id.internal, id.internal + kNcclUniqueIdBytes, bytes.begin());
        return bytes;
      },
      exchange);
  if (!id_bytes.ok()) return id_bytes.status().WithContext(who);
  ncclUniqueId id;
  std::copy(id_bytes->begin(), id_bytes->end(), id.internal);

  // Non-blocking initialisation, polled so that a deadline or a stop can end it.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, world, id, rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    const std::string text = NcclText(rc, comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return UnavailableError(who + ": ncclCommInitRankConfig: " + text);
  }
  PollOutcome init = Poll(
      [&]() -> Result<bool> {
        const ncclResult_t state = AsyncState(comm);
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) return UnavailableError("ncclCommInitRankConfig: " + NcclText(state, comm));
        return true;
      },
      [&]() -> std::string {
        return options.stop != nullptr && options.stop->load() ? "stopped while forming the group" : "";
      },
      deadline);
  if (!init.status.ok() || !init.abort_reason.empty() || init.timed_out) {
    ncclCommAbort(comm);
    if (!init.status.ok()) return init.status.WithContext(who);
    if (!init.abort_reason.empty()) return AbortedError(who + ": " + init.abort_reason);
    return UnavailableError(who + ": the group did not form within " + FormatSeconds(options.init_timeout) +
                            " (a rank that never called ncclCommInitRankConfig, or a network NCCL cannot use: "
                            "NCCL_DEBUG=INFO shows its bootstrap)");
  }

  cudaStream_t stream = nullptr;
  cudaEvent_t order_event = nullptr, done_event = nullptr;
  float* scratch = nullptr;
  cudaError_t crc = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (crc == cudaSuccess) crc = cudaEventCreateWithFlags(&order_event, cudaEventDisableTiming);
  if (crc == cudaSuccess) crc = cudaEventCreateWithFlags(&done_event, cudaEventDisableTiming);
  if (crc == cudaSuccess) crc = cudaMalloc(&scratch, sizeof(float));
  if (crc != cudaSuccess) {
    ncclCommAbort(comm);
    if (scratch != nullptr) cudaFree(scratch);
    if (done_event != nullptr) cudaEventDestroy(done_event);
    if (order_event != nullptr) cudaEventDestroy(order_event);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return UnavailableError(who + ": creating the stream and scratch: " + CudaText(crc));
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(rank, world, options, comm, stream, order_event, done_event, scratch));
}

NcclCommunicator::~NcclCommunicator() {
  if (!aborted_) {
    // A healthy communicator is finalized (its outstanding work flushed), then destroyed; if
    // finalizing does not finish in time it is aborted instead.
    bool finalized = false;
    const ncclResult_t rc = health().ok() ? ncclCommFinalize(comm_) : ncclInternalError;
    if (rc == ncclSuccess || rc == ncclInProgress) {
      PollOutcome done = Poll(
          [&]() -> Result<bool> {
            const ncclResult_t state = AsyncState(comm_);
            if (state == ncclInProgress) return false;
            if (state != ncclSuccess) return UnavailableError(NcclText(state, comm_));
            return true;
          },
          [&]() { return AbortReason(); }, std::chrono::steady_clock::now() + options_.collective_timeout);
      finalized = done.finished();
    }
    if (finalized) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  cudaFree(barrier_scratch_);
  cudaEventDestroy(done_event_);
  cudaEventDestroy(order_event_);
  cudaStreamDestroy(stream_);
}

std::string NcclCommunicator::Who() const {
  return "nccl rank " + std::to_string(rank()) + "/" + std::to_string(world_size()) + " on cuda:" +
         std::to_string(options_.device);
}

std::string NcclCommunicator::Describe() const { return Who(); }

bool NcclCommunicator::CanReduce(DType dtype) const {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

void NcclCommunicator::RequestAbort(const std::string& reason) {
  {
    std::lock_guard lock(abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "abort requested" : reason;
  }
  abort_requested_.store(true);
}

std::string NcclCommunicator::AbortReason() const {
  if (abort_requested_.load()) {
    std::lock_guard lock(abort_mu_);
    return abort_reason_;
  }
  if (options_.stop != nullptr && options_.stop->load()) return "the worker was told to stop";
  return "";
}

Status NcclCommunicator::NotAborting(std::string_view what) {
  std::string why = AbortReason();
  if (why.empty()) return Status::Ok();
  return Fail(AbortedError(Who() + ": " + std::string(what) + ": " + why));
}

Status NcclCommunicator::Fail(Status status) {
  if (!aborted_) {
    ncclCommAbort(comm_);
    aborted_ = true;
  }
  return Record(std::move(status));
}

Status NcclCommunicator::CheckDevicePointer(const void* data, std::string_view what) const {
  cudaPointerAttributes attributes{};
  cudaError_t rc = cudaPointerGetAttributes(&attributes, data);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clears the sticky-free error this query leaves behind
    return InvalidArgumentError(Who() + ": " + std::string(what) + ": not a CUDA pointer (" + CudaText(rc) + ")");
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return InvalidArgumentError(Who() + ": " + std::string(what) +
                                ": a host pointer; NCCL collectives take device memory");
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != options_.device) {
    return InvalidArgumentError(Who() + ": " + std::string(what) + ": memory of cuda:" +
                                std::to_string(attributes.device) + ", not of this communicator's device");
  }
  return Status::Ok();
}

Status NcclCommunicator::Launched(int rc_int, std::string_view what) {
  const auto rc = static_cast<ncclResult_t>(rc_int);
  if (rc == ncclSuccess) return Status::Ok();
  if (rc != ncclInProgress) return Fail(AbortedError(Who() + ": " + std::string(what) + ": " + NcclText(rc, comm_)));
  // Non-blocking mode: the call is still being issued; wait until NCCL has taken it.
  PollOutcome issued = Poll(
      [&]() -> Result<bool> {
        const ncclResult_t state = AsyncState(comm_);
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) return AbortedError(std::string(what) + ": " + NcclText(state, comm_));
        return true;
      },
      [&]() { return AbortReason(); }, std::chrono::steady_clock::now() + options_.collective_timeout);
  return Waited(issued, what, "not issued within " + FormatSeconds(options_.collective_timeout));
}

Status NcclCommunicator::Waited(const PollOutcome& outcome, std::string_view what, const std::string& timed_out) {
  if (!outcome.status.ok()) return Fail(outcome.status.WithContext(Who()));
  if (!outcome.abort_reason.empty()) return Fail(AbortedError(Who() + ": " + std::string(what) + ": " + outcome.abort_reason));
  if (outcome.timed_out) return Fail(AbortedError(Who() + ": " + std::string(what) + ": " + timed_out));
  return Status::Ok();
}

Status NcclCommunicator::OrderAfter(cudaStream_t producer) {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  cudaError_t rc = cudaEventRecord(order_event_, producer);
  if (rc == cudaSuccess) rc = cudaStreamWaitEvent(stream_, order_event_, 0);
  if (rc != cudaSuccess) return Fail(AbortedError(Who() + ": ordering after the compute stream: " + CudaText(rc)));
  return Status::Ok();
}

Status NcclCommunicator::OrderBefore(cudaStream_t consumer) {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  cudaError_t rc = cudaEventRecord(done_event_, stream_);
  if (rc == cudaSuccess) rc = cudaStreamWaitEvent(consumer, done_event_, 0);
  if (rc != cudaSuccess) return Fail(AbortedError(Who() + ": ordering the compute stream after the collectives: " + CudaText(rc)));
  return Status::Ok();
}

Status NcclCommunicator::BeginGroup() {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  if (ncclResult_t rc = ncclGroupStart(); rc != ncclSuccess) {
    return Fail(AbortedError(Who() + ": ncclGroupStart: " + NcclText(rc, comm_)));
  }
  ++group_depth_;
  return Status::Ok();
}

Status NcclCommunicator::EndGroup() {
  DSLAUNCH_CHECK(group_depth_ > 0) << "EndGroup without BeginGroup";
  --group_depth_;
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  return Launched(ncclGroupEnd(), "ncclGroupEnd");
}

Status NcclCommunicator::EnqueueAllReduce(BufferView data, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(CheckAllReduce(data));
  if (data.count == 0) return Status::Ok();
  DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(data.data, "allreduce buffer"));
  DSLAUNCH_RETURN_IF_ERROR(NotAborting("allreduce"));
  return Launched(ncclAllReduce(data.data, data.data, data.count, NcclType(data.dtype), NcclOp(op), comm_, stream_),
                  "ncclAllReduce");
}

Status NcclCommunicator::EnqueueReduceScatter(ConstBufferView input, BufferView output,
                                              const std::vector<size_t>& counts, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(CheckReduceScatter(input, output, counts));
  if (input.count == 0) return Status::Ok();
  DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(input.data, "reduce_scatter input"));
  if (output.count > 0) DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(output.data, "reduce_scatter output"));
  DSLAUNCH_RETURN_IF_ERROR(NotAborting("reduce_scatter"));
  const ncclDataType_t type = NcclType(input.dtype);
  if (AllEqual(counts)) {
    return Launched(ncclReduceScatter(input.data, output.data, counts[0], type, NcclOp(op), comm_, stream_),
                    "ncclReduceScatter");
  }
  // Uneven blocks: block r is reduced onto rank r, all in one group (one launch).
  const size_t elem = DTypeSize(input.dtype);
  return Launched(EachBlockInGroup(counts,
                                   [&](int r, size_t offset) {
                                     const void* send = static_cast<const char*>(input.data) + offset * elem;
                                     // recvbuff is read only on the root; elsewhere a valid device
                                     // pointer is passed all the same.
                                     void* receive = r == rank() ? output.data : const_cast<void*>(send);
                                     return ncclReduce(send, receive, counts[r], type, NcclOp(op), r, comm_, stream_);
                                   }),
                  "ncclReduce per block");
}

Status NcclCommunicator::EnqueueAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) {
  DSLAUNCH_RETURN_IF_ERROR(CheckAllGather(input, output, counts));
  if (output.count == 0) return Status::Ok();
  if (input.count > 0) DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(input.data, "allgather input"));
  DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(output.data, "allgather output"));
  DSLAUNCH_RETURN_IF_ERROR(NotAborting("allgather"));
  const ncclDataType_t type = NcclType(output.dtype);
  if (AllEqual(counts)) {
    return Launched(ncclAllGather(input.data, output.data, counts[0], type, comm_, stream_), "ncclAllGather");
  }
  // Uneven blocks: rank r broadcasts its block into place, all in one group (one launch).
  const size_t elem = DTypeSize(output.dtype);
  return Launched(EachBlockInGroup(counts,
                                   [&](int r, size_t offset) {
                                     void* place = static_cast<char*>(output.data) + offset * elem;
                                     return ncclBroadcast(r == rank() ? input.data : place, place, counts[r], type, r,
                                                          comm_, stream_);
                                   }),
                  "ncclBroadcast per block");
}

Status NcclCommunicator::Synchronize(std::string_view what) {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  DSLAUNCH_RETURN_IF_ERROR(NotAborting(what));
  PollOutcome done = Poll(
      [&]() -> Result<bool> {
        const ncclResult_t state = AsyncState(comm_);
        if (state != ncclSuccess && state != ncclInProgress) {
          return AbortedError(std::string(what) + ": " + NcclText(state, comm_) + " (a peer failed or left)");
        }
        cudaError_t rc = cudaStreamQuery(stream_);
        if (rc == cudaErrorNotReady) return false;
        if (rc != cudaSuccess) return AbortedError(std::string(what) + ": " + CudaText(rc));
        return true;
      },
      [&]() { return AbortReason(); }, std::chrono::steady_clock::now() + options_.collective_timeout);
  return Waited(done, what,
                "not finished within " + FormatSeconds(options_.collective_timeout) + " (a peer stalled)");
}

Status NcclCommunicator::DoAllReduce(BufferView data, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(EnqueueAllReduce(data, op));
  return Synchronize("allreduce");
}

Status NcclCommunicator::DoReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                                         ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(EnqueueReduceScatter(input, output, counts, op));
  return Synchronize("reduce_scatter");
}

Status NcclCommunicator::DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) {
  DSLAUNCH_RETURN_IF_ERROR(EnqueueAllGather(input, output, counts));
  return Synchronize("allgather");
}

Status NcclCommunicator::DoBroadcast(BufferView data, int root) {
  DSLAUNCH_RETURN_IF_ERROR(CheckDevicePointer(data.data, "broadcast buffer"));
  DSLAUNCH_RETURN_IF_ERROR(NotAborting("broadcast"));
  DSLAUNCH_RETURN_IF_ERROR(
      Launched(ncclBroadcast(data.data, data.data, data.count, NcclType(data.dtype), root, comm_, stream_),
               "ncclBroadcast"));
  return Synchronize("broadcast");
}

Status NcclCommunicator::DoBarrier() {
  DSLAUNCH_RETURN_IF_ERROR(NotAborting("barrier"));
  DSLAUNCH_RETURN_IF_ERROR(
      Launched(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
               "ncclAllReduce (barrier)"));
  return Synchronize("barrier");
}

Status NcclCommunicator::DoSend(ConstBufferView, int) {
  return FailedPreconditionError(Who() + ": send: pipeline parallelism on NCCL comes with the device engine (docs/gpu.md)");
}

Status NcclCommunicator::DoRecv(BufferView, int) {
  return FailedPreconditionError(Who() + ": recv: pipeline parallelism on NCCL comes with the device engine (docs/gpu.md)");
}

Status NcclCommunicator::DoFlushSends() { return Status::Ok(); }  // nothing was sent

}  // namespace dslaunch::runtime
