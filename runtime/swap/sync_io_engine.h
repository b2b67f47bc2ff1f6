// SyncIoEngine: pread/pwrite in block_size pieces, done inside Start (io_engine.h's contract; Wait
// only returns the stored status). The fallback where io_uring cannot be set up, and the
// reference the asynchronous engine is tested against.
#pragma once

#include <unordered_map>

#include "runtime/swap/io_engine.h"

namespace dslaunch::runtime::swap {

class SyncIoEngine final : public IoEngine {
 public:
  explicit SyncIoEngine(uint64_t block_size) : block_size_(block_size) {}
  Result<IoTicket> Start(const IoRequest& request) override;
  Status Wait(IoTicket ticket) override;
  std::string_view name() const override { return "pread/pwrite"; }
  IoStats stats() const override { return stats_; }

 private:
  Status Transfer(const IoRequest& request);

  uint64_t block_size_;
  IoTicket next_ticket_ = 1;
  std::unordered_map<IoTicket, Status> done_;
  IoStats stats_;
};

}  // namespace dslaunch::runtime::swap
