#include "agent/replica/replica_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crc32c.h"
#include "common/endpoint/endpoint_client.h"

namespace dslaunch::agent::replica {

namespace {

std::string CopyName(const snapshot::SlotHeader& h) { return "the copy of " + snapshot::Describe(h) + ": "; }

}  // namespace

IncomingCopy::~IncomingCopy() { Unmap(); }

IncomingCopy::IncomingCopy(IncomingCopy&& other) noexcept
    : fd_(std::move(other.fd_)),
      map_(std::exchange(other.map_, nullptr)),
      header_(other.header_),
      size_(other.size_),
      written_(other.written_),
      crc_(other.crc_) {}

void IncomingCopy::Unmap() {
  if (map_ != nullptr) ::munmap(map_, size_);
  map_ = nullptr;
}

Status IncomingCopy::Append(std::string_view bytes) {
  if (bytes.size() > size_ - written_) {
    return DataLossError(CopyName(header_) + "more bytes than the " + std::to_string(size_) + " announced");
  }
  std::memcpy(map_ + written_, bytes.data(), bytes.size());
  crc_ = Crc32c(map_ + written_, bytes.size(), crc_);
  written_ += bytes.size();
  return Status::Ok();
}

Status IncomingCopy::ReadFrom(int socket, std::chrono::steady_clock::time_point deadline) {
  const std::string what = CopyName(header_);
  for (;;) {
    if (!WaitReadable(socket, deadline).ok()) {
      return DeadlineExceededError(what + "nothing more arrived after " + std::to_string(written_) + " of " +
                                   std::to_string(size_) + " bytes");
    }
    const ssize_t n = ::recv(socket, map_ + written_, static_cast<size_t>(size_ - written_), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return ErrnoError(what + "receive", errno);
    if (n == 0) {
      return UnavailableError(what + "the sender closed the connection after " + std::to_string(written_) + " of " +
                              std::to_string(size_) + " bytes");
    }
    crc_ = Crc32c(map_ + written_, static_cast<size_t>(n), crc_);
    written_ += static_cast<uint64_t>(n);
    return Status::Ok();
  }
}

Result<IncomingCopy> ReplicaStore::Begin(const snapshot::SlotHeader& header, uint64_t bytes) {
  const std::string what = CopyName(header);
  DSLAUNCH_RETURN_IF_ERROR(snapshot::CheckHeader(header, bytes, what));
  const std::string name = "dslaunch-snapshot-copy-rank" + std::to_string(header.rank);
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ErrnoError(what + "memfd_create", errno);
  IncomingCopy copy;
  copy.fd_ = UniqueFd(fd);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return ErrnoError(what + "resize to " + std::to_string(bytes), errno);
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return ErrnoError(what + "map " + std::to_string(bytes) + " bytes", errno);
  copy.map_ = static_cast<std::byte*>(map);
  copy.header_ = header;
  copy.header_.acked = snapshot::kNotAcked;  // the sender's answer is not this copy's
  copy.size_ = bytes;
  std::memcpy(copy.map_, &copy.header_, sizeof(header));
  copy.written_ = sizeof(header);
  return copy;
}

Status ReplicaStore::Keep(IncomingCopy copy) {
  const snapshot::SlotHeader& h = copy.header_;
  const std::string what = CopyName(h);
  if (copy.written_ != copy.size_) {
    return DataLossError(what + "cut off at " + std::to_string(copy.written_) + " of " +
                         std::to_string(copy.size_) + " bytes");
  }
  if (copy.crc_ != h.crc32c) {
    return DataLossError(what + "corrupt: CRC-32C " + Crc32cText(copy.crc_) + ", its header records " +
                         Crc32cText(h.crc32c));
  }
  copy.Unmap();  // no writable mapping may remain for the seal
  if (::fcntl(copy.fd_.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return ErrnoError(what + "seal", errno);
  }
  std::lock_guard lock(mu_);
  // A copy written by a later generation: that generation resumed, the earlier copies are unneeded.
  std::erase_if(copies_, [&](const Copy& c) { return c.header.generation < h.generation; });
  size_t of_rank = 0;
  for (const Copy& c : copies_) of_rank += c.header.rank == h.rank ? 1 : 0;
  for (auto it = copies_.begin(); it != copies_.end() && of_rank >= kCopiesPerRank;) {
    if (it->header.rank == h.rank) {
      it = copies_.erase(it);  // the oldest of the rank first
      --of_rank;
    } else {
      ++it;
    }
  }
  copies_.push_back(Copy{std::move(copy.fd_), h, copy.size_});
  return Status::Ok();
}

Result<std::vector<UniqueFd>> ReplicaStore::Descriptors() const {
  std::lock_guard lock(mu_);
  std::vector<UniqueFd> fds;
  for (const Copy& c : copies_) {
    const int fd = ::fcntl(c.fd.get(), F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return ErrnoError("duplicate the descriptor of a snapshot copy", errno);
    fds.emplace_back(fd);
  }
  return fds;
}

std::vector<snapshot::SlotHeader> ReplicaStore::Held() const {
  std::lock_guard lock(mu_);
  std::vector<snapshot::SlotHeader> held;
  for (const Copy& c : copies_) held.push_back(c.header);
  return held;
}

uint64_t ReplicaStore::bytes() const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const Copy& c : copies_) n += c.bytes;
  return n;
}

}  // namespace dslaunch::agent::replica
