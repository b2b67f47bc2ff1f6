#include "common/snapshot/slot_header.h"

#include <cstring>

namespace dslaunch::snapshot {

Ack AckOf(int64_t acked, int64_t step) {
  if (acked == step) return Ack::kStored;
  if (acked == FailedAck(step)) return Ack::kFailed;
  return Ack::kPending;
}

Status CheckHeader(const SlotHeader& h, size_t size, std::string_view where) {
  const std::string at(where);
  if (h.complete != 1) return NotFoundError(at + "no complete snapshot (a write did not finish)");
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return DataLossError(at + "not a snapshot (bad magic)");
  const size_t floats = size / sizeof(float);
  const bool fits = h.meta_bytes <= size && TensorsOffset(h.meta_bytes) <= size &&
                    (h.tensors == 0 || h.floats_per_tensor <= floats / h.tensors) &&
                    TensorsOffset(h.meta_bytes) + h.tensors * h.floats_per_tensor * sizeof(float) == size;
  if (!fits) {
    return DataLossError(at + "its header records " + std::to_string(h.tensors) + " tensors of " +
                         std::to_string(h.floats_per_tensor) + " elements and " + std::to_string(h.meta_bytes) +
                         " bytes of meta.json, but it holds " + std::to_string(size) + " bytes");
  }
  if (h.rank < 0 || h.world <= 0 || h.rank >= h.world || h.step < 0) {
    return DataLossError(at + "its header records rank " + std::to_string(h.rank) + " of " + std::to_string(h.world) +
                         " at step " + std::to_string(h.step));
  }
  return Status::Ok();
}

std::string Describe(const SlotHeader& h) {
  return "step " + std::to_string(h.step) + " of rank " + std::to_string(h.rank) + " (of " + std::to_string(h.world) +
         ")";
}

}  // namespace dslaunch::snapshot
