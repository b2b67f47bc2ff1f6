#include "runtime/swap/uring_io_engine.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/swap/sync_io_engine.h"

namespace dslaunch::runtime::swap {

Result<std::unique_ptr<UringIoEngine>> UringIoEngine::Create(const AioConfig& config) {
  std::unique_ptr<UringIoEngine> e(new UringIoEngine(config));
  int err = io_uring_queue_init(static_cast<unsigned>(config.queue_depth), &e->ring_, 0);
  if (err < 0) {
    return UnavailableError("io_uring_queue_init(" + std::to_string(config.queue_depth) + "): " + std::strerror(-err));
  }
  e->ring_ready_ = true;
  return e;
}

UringIoEngine::~UringIoEngine() {
  if (!ring_ready_) return;
  queued_.clear();
  while (!in_flight_.empty()) {
    if (!Reap().ok()) break;  // the ring is broken: nothing more will complete
  }
  io_uring_queue_exit(&ring_);
}

Result<IoTicket> UringIoEngine::Start(const IoRequest& r) {
  IoTicket t = next_ticket_++;
  Transfer& transfer = transfers_[t];
  for (uint64_t done = 0; done < r.buffer.size(); done += config_.block_size) {
    uint64_t len = std::min<uint64_t>(config_.block_size, r.buffer.size() - done);
    queued_.push_back({t, r.op, r.fd, r.offset + done, r.buffer.data() + done, static_cast<uint32_t>(len)});
    ++transfer.pieces_left;
  }
  DSLAUNCH_RETURN_IF_ERROR(Submit());
  return t;
}

Status UringIoEngine::Submit() {
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

void UringIoEngine::Complete(const Piece& p, int result) {
  Transfer& t = transfers_.at(p.ticket);
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
    queued_.push_front(rest);
    return;
  }
  --t.pieces_left;
}

Status UringIoEngine::Reap() {
  io_uring_cqe* cqe = nullptr;
  int err = io_uring_wait_cqe(&ring_, &cqe);
  if (err == -EINTR) return Status::Ok();
  if (err < 0) return ErrnoError("io_uring_wait_cqe", -err);
  uint64_t id = io_uring_cqe_get_data64(cqe);
  int result = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  auto it = in_flight_.find(id);
  DSLAUNCH_CHECK(it != in_flight_.end()) << "completion for unknown piece " << id;
  Piece p = it->second;
  in_flight_.erase(it);
  Complete(p, result);
  return Status::Ok();
}

Status UringIoEngine::Wait(IoTicket ticket) {
  auto it = transfers_.find(ticket);
  DSLAUNCH_CHECK(it != transfers_.end()) << "Wait on unknown or already waited ticket " << ticket;
  while (it->second.pieces_left > 0) {
    DSLAUNCH_RETURN_IF_ERROR(Submit());
    DSLAUNCH_CHECK(!in_flight_.empty()) << "ticket " << ticket << " has pieces left and none in flight";
    DSLAUNCH_RETURN_IF_ERROR(Reap());
  }
  Status s = it->second.status;
  transfers_.erase(it);
  DSLAUNCH_RETURN_IF_ERROR(Submit());  // keep the queue busy for the transfers still pending
  return s;
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
