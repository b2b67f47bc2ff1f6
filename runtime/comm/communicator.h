// Communicator: the collectives the ZeRO engine needs, behind one interface with a Gloo (CPU), an
// in-process (tests/fakes/thread_communicator.h) and an NCCL (GPU, runtime/comm/nccl/)
// implementation. Contract and failure semantics in docs/communicator.md.
//
// Calls are collective: every rank of the group makes the same calls in the same order with
// matching arguments (same op, dtype and counts). Each call blocks until this rank's part is done
// and returns a Status:
//   kInvalidArgument  arguments that cannot be right (sizes, counts, root, dtype); detected
//                     locally before anything is sent; the communicator stays usable.
//   kAborted          a peer died, closed its connection or stalled past the collective timeout.
//                     The message names the peer where it is known ("rank 2 ([10.0.0.3]:41234)").
//                     The generation is over: the caller stops and the launcher restarts or ends
//                     the job.
//   kUnavailable      (Create only) the group could not be formed; retrying may help.
// After any error other than kInvalidArgument the communicator is unusable: every later call
// returns kAborted with the first error's message, without touching the network.
//
// Data types: the virtual entry points take a BufferView (pointer, element count, DType of
// runtime/core/dtype.h), so a new dtype is one enum value plus support in each implementation, not
// a new method per type.
// AllGather and Broadcast move bytes and accept every dtype, the integer ones included (kInt64 for
// counts, sizes and checksums; kUInt8 for raw bytes), so small records travel as what they are
// instead of being bit-cast through floats. Reductions accept the dtypes an implementation reports
// in CanReduce() (fp32 everywhere for now; fp16/bf16 storage is reduced after conversion to fp32
// by the engine, or natively by NCCL later); an integer reduction is refused with
// kInvalidArgument. Typed std::span overloads are the convenient front door for fp32, 16-bit
// storage, int64 and bytes.
//
// Thread-safety: one thread per communicator; rank() and world_size() may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/core/dtype.h"

namespace dslaunch::runtime {

enum class ReduceOp { kSum, kAvg, kMax };  // kAvg = sum / world_size

std::string_view ReduceOpName(ReduceOp op);

// A typed, non-owning view of `count` elements of `dtype` at `data`.
struct BufferView {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  size_t bytes() const { return count * DTypeSize(dtype); }
};
struct ConstBufferView {
  const void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  size_t bytes() const { return count * DTypeSize(dtype); }
};

inline BufferView View(std::span<float> s) {
  return {s.data(), s.size(), DType::kFloat32};
}
inline ConstBufferView View(std::span<const float> s) {
  return {s.data(), s.size(), DType::kFloat32};
}
inline BufferView View(std::span<int64_t> s) {
  return {s.data(), s.size(), DType::kInt64};
}
inline ConstBufferView View(std::span<const int64_t> s) {
  return {s.data(), s.size(), DType::kInt64};
}
inline BufferView View(std::span<uint8_t> s) {
  return {s.data(), s.size(), DType::kUInt8};
}
inline ConstBufferView View(std::span<const uint8_t> s) {
  return {s.data(), s.size(), DType::kUInt8};
}
// 16-bit storage; `dtype` must be kFloat16 or kBFloat16 (checked).
BufferView View(std::span<uint16_t> s, DType dtype);
ConstBufferView View(std::span<const uint16_t> s, DType dtype);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Reduces `data` element-wise over all ranks, in place; every rank gets the result.
  Status AllReduce(BufferView data, ReduceOp op);
  Status AllReduce(std::span<float> data, ReduceOp op) { return AllReduce(View(data), op); }

  // `input` (the same length on every rank, sum(counts)) is reduced over all ranks; this rank
  // receives block rank() of the result, counts[rank()] elements at offset
  // sum(counts[0..rank())), into `output`. counts.size() == world_size(); counts may be uneven
  // and may be zero. `input` and `output` must not overlap.
  Status ReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                       ReduceOp op);
  Status ReduceScatter(std::span<const float> input, std::span<float> output,
                       const std::vector<size_t>& counts, ReduceOp op) {
    return ReduceScatter(View(input), View(output), counts, op);
  }

  // Concatenates every rank's `input` (counts[r] elements from rank r) into `output`
  // (sum(counts) elements, rank order) on every rank. `input` may alias its own block of `output`.
  Status AllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts);
  Status AllGather(std::span<const float> input, std::span<float> output,
                   const std::vector<size_t>& counts) {
    return AllGather(View(input), View(output), counts);
  }
  Status AllGather(std::span<const int64_t> input, std::span<int64_t> output,
                   const std::vector<size_t>& counts) {
    return AllGather(View(input), View(output), counts);
  }
  Status AllGather(std::span<const uint8_t> input, std::span<uint8_t> output,
                   const std::vector<size_t>& counts) {
    return AllGather(View(input), View(output), counts);
  }

  // Copies `data` of rank `root` into `data` of every rank.
  Status Broadcast(BufferView data, int root);
  Status Broadcast(std::span<float> data, int root) { return Broadcast(View(data), root); }
  Status Broadcast(std::span<int64_t> data, int root) { return Broadcast(View(data), root); }
  Status Broadcast(std::span<uint8_t> data, int root) { return Broadcast(View(data), root); }

  // Returns once every rank has called Barrier.
  Status Barrier();

  // Point-to-point, for a pipeline's activations and their gradients (docs/communicator.md,
  // "Send and receive"). Not collective: only this rank and `peer` take part. The messages from
  // one rank to another arrive in the order they were sent, and the receiver names the same count
  // and dtype (a different size is an error: the two ranks disagree about the schedule).
  // Send is buffered: it returns once `data` may be reused, without waiting for `peer` to
  // receive; a failure to deliver is reported by a later call. Recv waits for the message, within
  // the implementation's collective timeout. FlushSends returns once every message sent so far
  // has been taken by its receiver (call it where the peers are known to have received them all,
  // e.g. at the end of a pipeline step). kInvalidArgument for a peer outside the group or this
  // rank itself.
  Status Send(ConstBufferView data, int peer);
  Status Send(std::span<const float> data, int peer) { return Send(View(data), peer); }
  Status Recv(BufferView data, int peer);
  Status Recv(std::span<float> data, int peer) { return Recv(View(data), peer); }
  Status FlushSends();

  // OK while usable; after a failure, the first error.
  const Status& health() const { return health_; }
  // Whether reductions accept `dtype`.
  virtual bool CanReduce(DType dtype) const { return dtype == DType::kFloat32; }
  // "gloo rank 1/4 on 127.0.0.1": for logs.
  virtual std::string Describe() const = 0;

 protected:
  Communicator(int rank, int world_size);

  // The argument checks of the collectives (kInvalidArgument), and kAborted when unusable: for an
  // implementation's own entry points (NCCL's enqueue-only calls) to check as the methods above do.
  Status CheckAllReduce(BufferView data) const;
  Status CheckReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) const;
  Status CheckAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) const;
  Status CheckPeer(std::string_view op, int peer) const;
  // kAborted after an earlier error, naming it.
  Status Usable() const;
  // Keeps the first error other than kInvalidArgument as health(); returns `status`.
  Status Record(Status status);

  // The collectives proper. Called only with validated arguments on a healthy communicator; any
  // error they return but kInvalidArgument (an implementation's own check, e.g. NCCL's of device
  // memory) makes the communicator unusable.
  virtual Status DoAllReduce(BufferView data, ReduceOp op) = 0;
  virtual Status DoReduceScatter(ConstBufferView input, BufferView output,
                                 const std::vector<size_t>& counts, ReduceOp op) = 0;
  virtual Status DoAllGather(ConstBufferView input, BufferView output,
                             const std::vector<size_t>& counts) = 0;
  virtual Status DoBroadcast(BufferView data, int root) = 0;
  virtual Status DoBarrier() = 0;
  virtual Status DoSend(ConstBufferView data, int peer) = 0;
  virtual Status DoRecv(BufferView data, int peer) = 0;
  virtual Status DoFlushSends() = 0;

 private:
  const int rank_;
  const int world_size_;
  Status health_;
};

// Element offsets of each rank's block: offsets[r] = sum(counts[0..r)); size counts.size() + 1.
std::vector<size_t> BlockOffsets(const std::vector<size_t>& counts);

// Multiplies every fp32 element by `factor` (kAvg after a sum).
void ScaleFloats(BufferView data, float factor);

}  // namespace dslaunch::runtime
