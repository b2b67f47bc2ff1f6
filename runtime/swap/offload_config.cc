#include "runtime/swap/offload_config.h"

#include <string>

namespace dslaunch::runtime::swap {
namespace {

Status KeyError(std::string_view where, std::string_view key, const std::string& rule) {
  return InvalidArgumentError(std::string(where) + "." + std::string(key) + ": " + rule);
}

Status CheckNvmePath(OffloadDevice device, const std::string& nvme_path, std::string_view where) {
  if (device == OffloadDevice::kNvme && nvme_path.empty()) {
    return KeyError(where, "nvme_path", "required when device is \"nvme\" (a directory on a local disk)");
  }
  return Status::Ok();
}

Status CheckBufferCount(int buffer_count, std::string_view where) {
  if (buffer_count < 1) {
    return KeyError(where, "buffer_count", "must be >= 1, got " + std::to_string(buffer_count));
  }
  return Status::Ok();
}

}  // namespace

Result<OffloadDevice> ParseOffloadDevice(std::string_view text, std::string_view where) {
  if (text == "none") return OffloadDevice::kNone;
  if (text == "cpu") return OffloadDevice::kCpu;
  if (text == "nvme") return OffloadDevice::kNvme;
  return KeyError(where, "device", "must be \"none\", \"cpu\" or \"nvme\", got \"" + std::string(text) + "\"");
}

std::string_view OffloadDeviceName(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::kNone: return "none";
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
  }
  return "?";
}

Status ValidateAioConfig(const AioConfig& c, std::string_view where) {
  if (c.block_size == 0 || c.block_size % kAioBlockAlignment != 0 || c.block_size > kMaxAioBlockSize) {
    return KeyError(where, "block_size",
                    "must be a positive multiple of " + std::to_string(kAioBlockAlignment) + " bytes (O_DIRECT alignment) up to " +
                        std::to_string(kMaxAioBlockSize) + ", got " + std::to_string(c.block_size));
  }
  if (c.queue_depth < 1 || c.queue_depth > kMaxAioQueueDepth) {
    return KeyError(where, "queue_depth",
                    "must be in [1, " + std::to_string(kMaxAioQueueDepth) + "], got " + std::to_string(c.queue_depth));
  }
  if (c.intra_op_parallelism < 1) {
    return KeyError(where, "intra_op_parallelism", "must be >= 1, got " + std::to_string(c.intra_op_parallelism));
  }
  return Status::Ok();
}

Status ValidateOffloadOptimizerConfig(const OffloadOptimizerConfig& c, std::string_view where) {
  DSLAUNCH_RETURN_IF_ERROR(CheckNvmePath(c.device, c.nvme_path, where));
  return CheckBufferCount(c.buffer_count, where);
}

Status ValidateOffloadParamConfig(const OffloadParamConfig& c, int zero_stage, std::string_view where) {
  if (c.device != OffloadDevice::kNone && zero_stage != 3) {
    return KeyError(where, "device",
                    "\"" + std::string(OffloadDeviceName(c.device)) +
                        "\" needs zero_optimization.stage 3 (only stage 3 partitions parameters), stage is " +
                        std::to_string(zero_stage));
  }
  DSLAUNCH_RETURN_IF_ERROR(CheckNvmePath(c.device, c.nvme_path, where));
  DSLAUNCH_RETURN_IF_ERROR(CheckBufferCount(c.buffer_count, where));
  if (c.buffer_size == 0) return KeyError(where, "buffer_size", "must be >= 1 element, got 0");
  return Status::Ok();
}

std::optional<std::string> NoteFor(const AioConfig& c, std::string_view where) {
  if (c.intra_op_parallelism == 1) return std::nullopt;
  return std::string(where) + ".intra_op_parallelism: " + std::to_string(c.intra_op_parallelism) +
         " accepted; one io_uring ring keeps queue_depth requests in flight without extra threads";
}

namespace {

// `already`: what is in host memory already, as a clause ("the parameters already live").
std::vector<KeyNote> DeviceNotes(OffloadDevice device, bool pin_memory, std::string_view already) {
  std::vector<KeyNote> notes;
  if (device == OffloadDevice::kCpu) {
    notes.push_back({"device", "\"cpu\" accepted; " + std::string(already) +
                                   " in host memory on this CPU runtime, so nothing moves"});
  }
  if (pin_memory && device != OffloadDevice::kNone) {
    notes.push_back({"pin_memory", "accepted; there is no GPU to copy to, so buffers are not pinned"});
  }
  return notes;
}

}  // namespace

std::vector<KeyNote> NotesFor(const OffloadOptimizerConfig& c) {
  return DeviceNotes(c.device, c.pin_memory, "the optimizer state already lives");
}

std::vector<KeyNote> NotesFor(const OffloadParamConfig& c) {
  return DeviceNotes(c.device, c.pin_memory, "the parameters already live");
}

}  // namespace dslaunch::runtime::swap
