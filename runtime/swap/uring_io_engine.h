// UringIoEngine: io_engine.h's contract over one io_uring ring (liburing). A transfer is split
// into block_size pieces; at most queue_depth pieces are in flight. With single_submit each
// piece is submitted by its own system call, otherwise every piece that fits is submitted in one.
// With overlap_events the queue is refilled as pieces complete; without, a batch of up to
// queue_depth pieces is submitted and all of it completes before the next batch goes out
// (DeepSpeed's aio semantics, docs/offload.md "Keys").
//
// A completion thread reaps completions and refills the queue, so a transfer larger than
// queue_depth pieces keeps the disk busy while the caller computes (the ring's update runs
// between Start and Wait). The caller's side is still one thread (io_engine.h); the engine's
// state is guarded by one mutex shared with its completion thread.
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/swap/io_engine.h"

namespace dslaunch::runtime::swap {

class UringIoEngine final : public IoEngine {
 public:
  // Sets up the ring and starts the completion thread; kUnavailable with io_uring_queue_init's
  // error where the kernel or a seccomp filter refuses (the caller falls back to SyncIoEngine).
  static Result<std::unique_ptr<UringIoEngine>> Create(const AioConfig& config);
  // Waits for the pieces still in flight (their buffers belong to the caller), stops the
  // completion thread and closes the ring. Queued pieces not yet submitted are dropped.
  ~UringIoEngine() override;

  Result<IoTicket> Start(const IoRequest& request) override;
  Status Wait(IoTicket ticket) override;
  std::string_view name() const override { return "io_uring"; }
  IoStats stats() const override;

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
  // Holds mu_.
  Status SubmitLocked();
  // Accounts for one completion (a short transfer requeues its rest). Holds mu_.
  void CompleteLocked(uint64_t id, int result);
  // The completion thread: reap, account, refill, wake waiters; until stopped and drained.
  void ReapLoop();

  const AioConfig config_;
  io_uring ring_{};
  bool ring_ready_ = false;
  std::thread reaper_;

  mutable std::mutex mu_;
  std::condition_variable done_;  // a transfer finished, or the engine failed
  bool stopping_ = false;
  Status failed_;  // the ring itself broke: every Wait returns this
  IoTicket next_ticket_ = 1;
  uint64_t next_piece_id_ = 1;
  std::deque<Piece> queued_;
  std::unordered_map<uint64_t, Piece> in_flight_;
  std::unordered_map<IoTicket, Transfer> transfers_;
  IoStats stats_;
};

}  // namespace dslaunch::runtime::swap
