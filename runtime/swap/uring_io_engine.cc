#include "runtime/swap/uring_io_engine.h"

#include <algorithm>
#include <cerrno>
#include <cstring>


namespace dslaunch::runtime::swap {
namespace {

// user_data of the no-op that wakes the completion thread at shutdown; piece ids start at 1.
constexpr uint64_t kWakeId = 0;

}  // namespace

Result<std::unique_ptr<UringIoEngine>> UringIoEngine::Create(const AioConfig& config) {
  std::unique_ptr<UringIoEngine> e(new UringIoEngine(config));
  // One extra entry for the shutdown no-op, so it never waits for a free slot.
  int err = io_uring_queue_init(static_cast<unsigned>(config.queue_depth) + 1, &e->ring_, 0);
  if (err < 0) {
    return UnavailableError("io_uring_queue_init(" + std::to_string(config.queue_depth) + "): " + std::strerror(-err));
  }
  e->ring_ready_ = true;
  e->reaper_ = std::thread([p = e.get()] { p->ReapLoop(); });
  return e;
}

UringIoEngine::~UringIoEngine() {
  if (!ring_ready_) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queued_.clear();
    if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, kWakeId);
      io_uring_submit(&ring_);
    }
  }
  reaper_.join();
  io_uring_queue_exit(&ring_);
}

Result<IoTicket> UringIoEngine::Start(const IoRequest& r) {
  std::lock_guard lock(mu_);
  if (!failed_.ok()) return failed_;
  IoTicket t = next_ticket_++;
  (r.op == IoOp::kRead ? stats_.bytes_read : stats_.bytes_written) += r.buffer.size();
  Transfer& transfer = transfers_[t];
  for (uint64_t done = 0; done < r.buffer.size(); done += config_.block_size) {
    uint64_t len = std::min<uint64_t>(config_.block_size, r.buffer.size() - done);
    queued_.push_back({t, r.op, r.fd, r.offset + done, r.buffer.data() + done, static_cast<uint32_t>(len)});
    ++transfer.pieces_left;
  }
  DSLAUNCH_RETURN_IF_ERROR(SubmitLocked());
  return t;
}

Status UringIoEngine::SubmitLocked() {
  const size_t depth = static_cast<size_t>(config_.queue_depth);
  // Without overlap_events a new batch waits until the previous one has fully completed.
  if (!config_.overlap_events && !in_flight_.empty()) return Status::Ok();
  size_t prepared = 0;
  while (!queued_.empty() && in_flight_.size() < depth) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;  // submission queue full until the next submit
    Piece p = queued_.front();
    queued_.pop_front();
    if (p.op == IoOp::kRead) {
      io_uring_prep_read(sqe, p.fd, p.data, p.len, p.offset);
    } else {
      io_uring_prep_write(sqe, p.fd, p.data, p.len, p.offset);
    }
    uint64_t id = next_piece_id_++;
    io_uring_sqe_set_data64(sqe, id);
    in_flight_.emplace(id, p);
    ++stats_.pieces;
    ++prepared;
    stats_.max_in_flight = std::max<uint64_t>(stats_.max_in_flight, in_flight_.size());
    if (config_.single_submit) {
      int n = io_uring_submit(&ring_);
      if (n < 0) return ErrnoError("io_uring_submit", -n);
      ++stats_.submit_calls;
      prepared = 0;
    }
  }
  if (prepared > 0) {
    int n = io_uring_submit(&ring_);
    if (n < 0) return ErrnoError("io_uring_submit", -n);
    ++stats_.submit_calls;
  }
  return Status::Ok();
}

void UringIoEngine::CompleteLocked(uint64_t id, int result) {
  auto it = in_flight_.find(id);
  DSLAUNCH_CHECK(it != in_flight_.end()) << "completion for unknown piece " << id;
  Piece p = it->second;
  in_flight_.erase(it);
  auto tit = transfers_.find(p.ticket);
  if (tit == transfers_.end()) return;  // waited for already, after the ring broke
  Transfer& t = tit->second;
  const char* what = p.op == IoOp::kRead ? "read" : "write";
  if (result < 0) {
    if (t.status.ok()) t.status = ErrnoError(std::string(what) + " at offset " + std::to_string(p.offset), -result);
  } else if (result == 0 && p.len > 0) {
    if (t.status.ok()) {
      t.status = DataLossError(std::string(what) + " at offset " + std::to_string(p.offset) + " stopped at the end of the file");
    }
  } else if (static_cast<uint32_t>(result) < p.len) {
    // A short transfer: the rest goes out as a piece of its own, ahead of the queue.
    Piece rest = p;
    rest.offset += static_cast<uint64_t>(result);
    rest.data += result;
    rest.len -= static_cast<uint32_t>(result);
    if (!stopping_) {
      queued_.push_front(rest);
      return;
    }
  }
  --t.pieces_left;
}

void UringIoEngine::ReapLoop() {
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    int err = io_uring_wait_cqe(&ring_, &cqe);  // the completion side is this thread's alone
    std::lock_guard lock(mu_);
    if (err == -EINTR) continue;
    if (err < 0) {
      failed_ = ErrnoError("io_uring_wait_cqe", -err);
      done_.notify_all();
      return;
    }
    uint64_t id = io_uring_cqe_get_data64(cqe);
    int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (id != kWakeId) CompleteLocked(id, result);
    if (Status s = SubmitLocked(); !s.ok() && failed_.ok()) failed_ = s;
    done_.notify_all();
    if (stopping_ && in_flight_.empty()) return;
  }
}

Status UringIoEngine::Wait(IoTicket ticket) {
  std::unique_lock lock(mu_);
  auto it = transfers_.find(ticket);
  DSLAUNCH_CHECK(it != transfers_.end()) << "Wait on unknown or already waited ticket " << ticket;
  done_.wait(lock, [&] { return it->second.pieces_left == 0 || !failed_.ok(); });
  Status s = it->second.pieces_left == 0 ? it->second.status : failed_;
  transfers_.erase(it);
  return s;
}

IoStats UringIoEngine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace dslaunch::runtime::swap
