#include "runtime/swap/io_engine.h"

#include <algorithm>

#include "runtime/swap/sync_io_engine.h"
#include "runtime/swap/uring_io_engine.h"

namespace dslaunch::runtime::swap {

IoStats Combined(const IoStats& a, const IoStats& b) {
  return {a.bytes_read + b.bytes_read, a.bytes_written + b.bytes_written, a.pieces + b.pieces,
          a.submit_calls + b.submit_calls, std::max(a.max_in_flight, b.max_in_flight)};
}

IoEngineChoice MakeIoEngine(IoBackend backend, const AioConfig& config) {
  IoEngineChoice choice;
  if (backend == IoBackend::kUring) {
    auto uring = UringIoEngine::Create(config);
    if (uring.ok()) {
      choice.engine = std::move(uring).value();
      return choice;
    }
    choice.warning = "io_uring is not available (" + uring.status().message() +
                     "); swap I/O uses synchronous pread/pwrite, without overlap of reads and writes";
  }
  choice.engine = std::make_unique<SyncIoEngine>(config.block_size);
  return choice;
}

}  // namespace dslaunch::runtime::swap
