// SwapStream: carries out ring_plan.h's plan over a SwapFile with an IoEngine and a ring of
// aligned buffers, handing each sub-group's bytes to the caller in order (docs/offload.md,
// "Pipeline"). Holds buffer_count buffers of the file's record stride; nothing else grows with
// the file.
//
// Not thread-safe. The file and the engine must outlive the stream. Run never returns with I/O
// in flight: on an error it waits for what it started and then returns the first error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/swap/aligned_buffer.h"
#include "runtime/swap/io_engine.h"
#include "runtime/swap/ring_plan.h"
#include "runtime/swap/swap_file.h"

namespace dslaunch::runtime::swap {

// Called once per sub-group, in order, with the sub-group's bytes (exactly group_bytes[group];
// read from the file when the mode reads, else the buffer's previous contents, to be filled).
// What it leaves there is written back when the mode writes. An error stops the stream.
using ProcessGroupFn = std::function<Status(size_t group, std::span<std::byte> bytes)>;

class SwapStream {
 public:
  // buffer_count buffers (>= 1) of file->record_stride() bytes each, aligned for O_DIRECT.
  static Result<SwapStream> Create(SwapFile* file, IoEngine* engine, int buffer_count);

  // Streams sub-groups 0..group_bytes.size()-1 (each at most record_bytes, at most record_count
  // of them: DSLAUNCH_CHECKed) through the ring in `mode`. Errors name the sub-group and the
  // file: "swap file '...': sub-group 3: read at offset ...: ...".
  Status Run(RingMode mode, std::span<const uint64_t> group_bytes, const ProcessGroupFn& process);

  size_t buffer_count() const { return buffers_.size(); }

 private:
  SwapStream(SwapFile* file, IoEngine* engine) : file_(file), engine_(engine) {}
  Status Execute(const RingAction& action, std::span<const uint64_t> group_bytes, const ProcessGroupFn& process);
  void Drain();

  SwapFile* file_;
  IoEngine* engine_;
  std::vector<AlignedBuffer> buffers_;
  std::vector<std::optional<IoTicket>> tickets_;  // per buffer: the transfer in flight
};

}  // namespace dslaunch::runtime::swap
