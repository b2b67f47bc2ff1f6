#include "runtime/comm/communicator.h"

#include <numeric>

namespace dslaunch::runtime {
namespace {

// Two byte ranges overlap.
bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

std::string Where(const Communicator& c, std::string_view op) {
  return std::string(op) + " on rank " + std::to_string(c.rank()) + "/" +
         std::to_string(c.world_size());
}

}  // namespace

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";
}

BufferView View(std::span<uint16_t> s, DType dtype) {
  DSLAUNCH_CHECK(Is16BitFloat(dtype)) << "uint16 storage needs fp16 or bf16, got " << DTypeName(dtype);
  return {s.data(), s.size(), dtype};
}

ConstBufferView View(std::span<const uint16_t> s, DType dtype) {
  DSLAUNCH_CHECK(Is16BitFloat(dtype)) << "uint16 storage needs fp16 or bf16, got " << DTypeName(dtype);
  return {s.data(), s.size(), dtype};
}

std::vector<size_t> BlockOffsets(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

void ScaleFloats(BufferView data, float factor) {
  DSLAUNCH_CHECK(data.dtype == DType::kFloat32) << "ScaleFloats on " << DTypeName(data.dtype);
  float* p = static_cast<float*>(data.data);
  for (size_t i = 0; i < data.count; ++i) p[i] *= factor;
}

Communicator::Communicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {
  DSLAUNCH_CHECK(world_size > 0 && rank >= 0 && rank < world_size)
      << "rank " << rank << " of world " << world_size;
}

Status Communicator::Usable() const {
  if (health_.ok()) return Status::Ok();
  return AbortedError("communicator unusable after an earlier error: " + health_.message());
}

Status Communicator::Record(Status status) {
  // kInvalidArgument is found before anything is sent (an implementation's own checks included):
  // the communicator stays usable.
  if (!status.ok() && status.code() != StatusCode::kInvalidArgument && health_.ok()) health_ = status;
  return status;
}

Status Communicator::CheckAllReduce(BufferView data) const {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  if (!CanReduce(data.dtype)) {
    return InvalidArgumentError(Where(*this, "allreduce") + ": cannot reduce " +
                                std::string(DTypeName(data.dtype)));
  }
  return Status::Ok();
}

Status Communicator::AllReduce(BufferView data, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(CheckAllReduce(data));
  if (data.count == 0) return Status::Ok();  // every rank sees the same count: nothing to do
  return Record(DoAllReduce(data, op));
}

Status Communicator::CheckReduceScatter(ConstBufferView input, BufferView output,
                                        const std::vector<size_t>& counts) const {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  const std::string where = Where(*this, "reduce_scatter");
  if (!CanReduce(input.dtype)) {
    return InvalidArgumentError(where + ": cannot reduce " + std::string(DTypeName(input.dtype)));
  }
  if (input.dtype != output.dtype)
    return InvalidArgumentError(where + ": input and output dtypes differ");
  if (counts.size() != static_cast<size_t>(world_size())) {
    return InvalidArgumentError(where + ": " + std::to_string(counts.size()) +
                                " counts for world size " + std::to_string(world_size()));
  }
  const size_t total = BlockOffsets(counts).back();
  if (input.count != total || output.count != counts[rank()]) {
    return InvalidArgumentError(where + ": input has " + std::to_string(input.count) +
                                " elements (counts sum to " + std::to_string(total) + "), output " +
                                std::to_string(output.count) + " (block is " +
                                std::to_string(counts[rank()]) + ")");
  }
  if (Overlap(input.data, input.bytes(), output.data, output.bytes())) {
    return InvalidArgumentError(where + ": input and output overlap");
  }
  return Status::Ok();
}

Status Communicator::ReduceScatter(ConstBufferView input, BufferView output,
                                   const std::vector<size_t>& counts, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(CheckReduceScatter(input, output, counts));
  if (input.count == 0) return Status::Ok();
  return Record(DoReduceScatter(input, output, counts, op));
}

Status Communicator::CheckAllGather(ConstBufferView input, BufferView output,
                                    const std::vector<size_t>& counts) const {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  const std::string where = Where(*this, "allgather");
  if (input.dtype != output.dtype)
    return InvalidArgumentError(where + ": input and output dtypes differ");
  if (counts.size() != static_cast<size_t>(world_size())) {
    return InvalidArgumentError(where + ": " + std::to_string(counts.size()) +
                                " counts for world size " + std::to_string(world_size()));
  }
  const std::vector<size_t> offsets = BlockOffsets(counts);
  if (input.count != counts[rank()] || output.count != offsets.back()) {
    return InvalidArgumentError(where + ": input has " + std::to_string(input.count) +
                                " elements (block is " + std::to_string(counts[rank()]) +
                                "), output " + std::to_string(output.count) + " (counts sum to " +
                                std::to_string(offsets.back()) + ")");
  }
  const size_t elem = DTypeSize(output.dtype);
  const void* own_block = static_cast<const char*>(output.data) + offsets[rank()] * elem;
  if (input.data != own_block && Overlap(input.data, input.bytes(), output.data, output.bytes())) {
    return InvalidArgumentError(where + ": input overlaps output other than as its own block");
  }
  return Status::Ok();
}

Status Communicator::AllGather(ConstBufferView input, BufferView output,
                               const std::vector<size_t>& counts) {
  DSLAUNCH_RETURN_IF_ERROR(CheckAllGather(input, output, counts));
  if (output.count == 0) return Status::Ok();
  return Record(DoAllGather(input, output, counts));
}

Status Communicator::Broadcast(BufferView data, int root) {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  if (root < 0 || root >= world_size()) {
    return InvalidArgumentError(Where(*this, "broadcast") + ": root " + std::to_string(root) +
                                " out of range");
  }
  if (data.count == 0) return Status::Ok();
  return Record(DoBroadcast(data, root));
}

Status Communicator::Barrier() {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  return Record(DoBarrier());
}

Status Communicator::CheckPeer(std::string_view op, int peer) const {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  if (peer < 0 || peer >= world_size() || peer == rank()) {
    return InvalidArgumentError(Where(*this, op) + ": peer " + std::to_string(peer) +
                                " is not another rank of the group");
  }
  return Status::Ok();
}

Status Communicator::Send(ConstBufferView data, int peer) {
  DSLAUNCH_RETURN_IF_ERROR(CheckPeer("send", peer));
  if (data.count == 0) return Status::Ok();  // the receiver names the same count: nothing to do
  return Record(DoSend(data, peer));
}

Status Communicator::Recv(BufferView data, int peer) {
  DSLAUNCH_RETURN_IF_ERROR(CheckPeer("recv", peer));
  if (data.count == 0) return Status::Ok();
  return Record(DoRecv(data, peer));
}

Status Communicator::FlushSends() {
  DSLAUNCH_RETURN_IF_ERROR(Usable());
  return Record(DoFlushSends());
}

}  // namespace dslaunch::runtime
