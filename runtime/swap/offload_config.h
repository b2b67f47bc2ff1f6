// DeepSpeed's `aio`, `zero_optimization.offload_optimizer` and `zero_optimization.offload_param`
// blocks as plain structs, each with one validator (docs/offload.md, "Keys"). Pure: no file system
// access; the nvme_path checks that need the disk live in swap_directory.h. The train.json parser
// fills these structs and calls the validators; the JSON path of the block is the `where` argument
// so that errors read "zero_optimization.offload_optimizer.buffer_count: must be >= 1, got 0".
//
// Defaults are DeepSpeed's, so a config that omits a key behaves as it does under DeepSpeed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime::swap {

// Where a kind of state lives: "none" (in the engine's memory, the default), "cpu" (host memory:
// on this CPU runtime the state is there already, so "cpu" behaves as "none" and is noted once),
// "nvme" (swap files under nvme_path, streamed through a ring of buffers).
enum class OffloadDevice { kNone, kCpu, kNvme };

// "none" | "cpu" | "nvme" -> the device; anything else is an error naming `where` and the value.
Result<OffloadDevice> ParseOffloadDevice(std::string_view text, std::string_view where);
std::string_view OffloadDeviceName(OffloadDevice device);

// The `aio` block: how swap I/O is issued (io_uring here, libaio in DeepSpeed).
struct AioConfig {
  // Bytes per I/O request: a read or write of a record is split into pieces of this size.
  // A multiple of kAioBlockAlignment so that every piece stays O_DIRECT-aligned.
  uint64_t block_size = 1048576;
  // Requests in flight at once (the io_uring submission queue depth).
  int queue_depth = 8;
  // DeepSpeed's threads per request; one io_uring ring keeps queue_depth requests in flight
  // without threads, so values above 1 are accepted and noted (docs/offload.md).
  int intra_op_parallelism = 1;
  // true: one submit system call per piece; false: a batch of pieces per submit.
  bool single_submit = false;
  // true: refill the queue as each piece completes; false: submit queue_depth pieces, wait for
  // all of them, then submit the next batch.
  bool overlap_events = true;
};

// O_DIRECT needs offsets and lengths aligned to the file system's logical block size; 4096 covers
// every common one (512-byte and 4K sectors), so block sizes must be multiples of it.
inline constexpr uint64_t kAioBlockAlignment = 4096;
// Above this queue depth io_uring needs more locked memory than a default RLIMIT_MEMLOCK allows
// on older kernels, and no NVMe drive gains from more; larger values are configuration mistakes.
inline constexpr int kMaxAioQueueDepth = 4096;
// A bound that catches a misplaced unit (bytes given as a count of blocks of 1 GiB, ...).
inline constexpr uint64_t kMaxAioBlockSize = uint64_t{1} << 30;

// The `offload_optimizer` block: where the fp32 master weights and optimizer moments live.
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;  // required when device is nvme
  // Buffers in the ring that streams sub-groups (read next, update this, write previous).
  int buffer_count = 4;
  // DeepSpeed pins the buffers for GPU copies; with no GPU, pinning only locks memory, so it is
  // accepted and noted.
  bool pin_memory = false;
};

// The `offload_param` block: where the 16-bit parameter partitions live (stage 3 only).
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;  // required when device is nvme
  int buffer_count = 5;
  // Elements per buffer: the largest parameter group fetched at once must fit.
  uint64_t buffer_size = 100000000;
  // Parameter elements that may stay resident in memory; the rest are fetched from disk.
  uint64_t max_in_cpu = 1000000000;
  bool pin_memory = false;
};

// Each validator returns OK or kInvalidArgument naming `where`.key, the bad value and the rule.
Status ValidateAioConfig(const AioConfig& config, std::string_view where = "aio");
Status ValidateOffloadOptimizerConfig(const OffloadOptimizerConfig& config,
                                      std::string_view where = "zero_optimization.offload_optimizer");
// offload_param with device nvme needs ZeRO stage 3 (only then are parameters partitioned).
Status ValidateOffloadParamConfig(const OffloadParamConfig& config, int zero_stage,
                                  std::string_view where = "zero_optimization.offload_param");

// One-line notes for accepted keys that change nothing here ("cpu" device, pin_memory,
// intra_op_parallelism > 1); the caller prints each once. Empty when there is nothing to say.
std::optional<std::string> NoteFor(const AioConfig& config, std::string_view where = "aio");

// The same for an offload block, one note per key: the key inside the block ("device",
// "pin_memory") and what to say about it (the parser adds the file and the key's path).
struct KeyNote {
  std::string key;
  std::string text;
};
std::vector<KeyNote> NotesFor(const OffloadOptimizerConfig& config);
std::vector<KeyNote> NotesFor(const OffloadParamConfig& config);

}  // namespace dslaunch::runtime::swap
