#include "runtime/swap/sync_io_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace dslaunch::runtime::swap {

Status SyncIoEngine::Transfer(const IoRequest& r) {
  const bool read = r.op == IoOp::kRead;
  uint64_t done = 0;
  while (done < r.buffer.size()) {
    const uint64_t len = std::min<uint64_t>(block_size_, r.buffer.size() - done);
    const off_t offset = static_cast<off_t>(r.offset + done);
    std::byte* p = r.buffer.data() + done;
    ssize_t n = read ? ::pread(r.fd, p, len, offset) : ::pwrite(r.fd, p, len, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(std::string(read ? "pread" : "pwrite") + " at offset " + std::to_string(offset), errno);
    if (n == 0) {
      return DataLossError(std::string(read ? "read" : "write") + " at offset " + std::to_string(offset) +
                           " stopped at the end of the file");
    }
    ++stats_.pieces;
    done += static_cast<uint64_t>(n);  // a short transfer continues from where it stopped
  }
  return Status::Ok();
}

Result<IoTicket> SyncIoEngine::Start(const IoRequest& request) {
  IoTicket t = next_ticket_++;
  stats_.max_in_flight = 1;
  (request.op == IoOp::kRead ? stats_.bytes_read : stats_.bytes_written) += request.buffer.size();
  done_.emplace(t, Transfer(request));
  return t;
}

Status SyncIoEngine::Wait(IoTicket ticket) {
  auto it = done_.find(ticket);
  DSLAUNCH_CHECK(it != done_.end()) << "Wait on unknown or already waited ticket " << ticket;
  Status s = it->second;
  done_.erase(it);
  return s;
}

}  // namespace dslaunch::runtime::swap
