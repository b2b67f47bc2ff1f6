// UringIoEngine: io_engine.h's contract over one io_uring ring (liburing). A transfer is split
// into block_size pieces; at most queue_depth pieces are in flight. With single_submit each
// piece is submitted by its own system call, otherwise every piece that fits is submitted in one.
// With overlap_events the queue is refilled as pieces complete; without, a batch of up to
// queue_depth pieces is submitted and all of it completes before the next batch goes out
// (DeepSpeed's aio semantics, docs/offload.md "Keys").
#pragma once

#include <liburing.h>

#include <deque>
#include <memory>
#include <unordered_map>

#include "runtime/swap/io_engine.h"

namespace dslaunch::runtime::swap {

class UringIoEngine final : public IoEngine {
 public:
  // Sets up the ring; kUnavailable with io_uring_queue_init's error where the kernel or a seccomp
  // filter refuses (the caller falls back to SyncIoEngine).
  static Result<std::unique_ptr<UringIoEngine>> Create(const AioConfig& config);
  // Waits for the pieces still in flight (their buffers belong to the caller) and closes the ring.
  ~UringIoEngine() override;

  Result<IoTicket> Start(const IoRequest& request) override;
  Status Wait(IoTicket ticket) override;
  std::string_view name() const override { return "io_uring"; }
  IoStats stats() const override { return stats_; }

 private:
  struct Piece {
    IoTicket ticket = 0;
    IoOp op = IoOp::kRead;
    int fd = -1;
    uint64_t offset = 0;
    std::byte* data = nullptr;
    uint32_t len = 0;
  };
  struct Transfer {
    uint64_t pieces_left = 0;
    Status status;
  };

  explicit UringIoEngine(const AioConfig& config) : config_(config) {}
  // Moves queued pieces into the submission queue as the queue depth and overlap_events allow.
  Status Submit();
  // Waits for one completion and accounts for it (a short transfer requeues its rest).
  Status Reap();
  void Complete(const Piece& piece, int result);

  AioConfig config_;
  io_uring ring_{};
  bool ring_ready_ = false;
  IoTicket next_ticket_ = 1;
  uint64_t next_piece_id_ = 1;
  std::deque<Piece> queued_;
  std::unordered_map<uint64_t, Piece> in_flight_;
  std::unordered_map<IoTicket, Transfer> transfers_;
  IoStats stats_;
};

}  // namespace dslaunch::runtime::swap
