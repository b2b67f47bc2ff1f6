// IoEngine: the seam through which swap files are read and written (docs/offload.md, "I/O").
// Two real implementations with the same contract: UringIoEngine (asynchronous, io_uring) and
// SyncIoEngine (pread/pwrite at Start: the fallback and the reference); tests add a fake.
//
// Contract: Start queues one transfer of `buffer` at `offset` of `fd` and returns a ticket; the
// buffer must stay alive and untouched until Wait(ticket) returns. Wait blocks until that
// transfer has completed and returns its status; every ticket is waited for exactly once.
// Transfers are split into pieces of at most the engine's block size. A read that meets the end
// of the file is kDataLoss naming the offset. Not thread-safe: one engine per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/swap/offload_config.h"

namespace dslaunch::runtime::swap {

enum class IoOp { kRead, kWrite };

struct IoRequest {
  IoOp op = IoOp::kRead;
  int fd = -1;
  uint64_t offset = 0;
  std::span<std::byte> buffer;
};

using IoTicket = uint64_t;

// Counts an engine keeps, for tests and benchmarks to see what it did.
struct IoStats {
  uint64_t bytes_read = 0;     // of the transfers started
  uint64_t bytes_written = 0;
  uint64_t pieces = 0;         // block-size pieces issued
  uint64_t submit_calls = 0;   // io_uring_enter submissions (0 for the synchronous engine)
  uint64_t max_in_flight = 0;  // most pieces in flight at once
};

// Two engines' counts as one: the sums, and the larger of the two max_in_flight.
IoStats Combined(const IoStats& a, const IoStats& b);

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  virtual Result<IoTicket> Start(const IoRequest& request) = 0;
  virtual Status Wait(IoTicket ticket) = 0;
  virtual std::string_view name() const = 0;
  virtual IoStats stats() const = 0;
};

enum class IoBackend { kUring, kSync };

struct IoEngineChoice {
  std::unique_ptr<IoEngine> engine;
  // Set when io_uring was asked for and could not be set up (seccomp in containers, an old
  // kernel, io_uring_disabled): the engine is synchronous and this line says why. Print it once.
  std::optional<std::string> warning;
};

// An engine of `backend` honouring `config` (validated by ValidateAioConfig). Never fails:
// io_uring falls back to the synchronous engine with a warning.
IoEngineChoice MakeIoEngine(IoBackend backend, const AioConfig& config);

}  // namespace dslaunch::runtime::swap
