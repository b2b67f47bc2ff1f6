// ReplicaStore: the copies of peer nodes' in-memory snapshots this agent holds for them
// (docs/checkpoint.md, "Copies on peer nodes"). Each copy is a memory file of its own, filled as
// it arrives, checked (header, size, CRC-32C) and sealed against writes before it is kept, so a
// copy a worker reads never changes under it and a copy cut off mid-way is never kept. It keeps the
// two newest copies of each saving rank, and once a copy written by generation G arrives, none
// written by an earlier generation (G's workers resumed, so the earlier copies are not needed).
// Local rank 0 of each of this node's workers gets duplicates of the kept copies' descriptors, read
// at a restart. Thread-safe: the copy connections' threads add, the session takes descriptors.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/snapshot/slot_header.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent::replica {

// Copies kept per saving rank: the newest, and the one before while the newest may not be
// complete on every rank yet.
inline constexpr size_t kCopiesPerRank = 2;

// A copy being received: its memory file, mapped and filled in order, straight from the socket.
class IncomingCopy {
 public:
  IncomingCopy() = default;
  ~IncomingCopy();
  IncomingCopy(IncomingCopy&& other) noexcept;
  IncomingCopy& operator=(IncomingCopy&&) = delete;
  IncomingCopy(const IncomingCopy&) = delete;
  IncomingCopy& operator=(const IncomingCopy&) = delete;

  // Appends the next bytes after the header; kDataLoss past the announced size.
  Status Append(std::string_view bytes);
  // Reads the next bytes after the header from `socket` (one read, at most what is missing), by
  // `deadline`: kDeadlineExceeded then, kUnavailable when the peer closed the connection.
  Status ReadFrom(int socket, std::chrono::steady_clock::time_point deadline);
  const snapshot::SlotHeader& header() const { return header_; }
  uint64_t received() const { return written_; }
  uint64_t size() const { return size_; }

 private:
  friend class ReplicaStore;
  void Unmap();

  UniqueFd fd_;
  std::byte* map_ = nullptr;  // the whole file, writable until kept
  snapshot::SlotHeader header_{};
  uint64_t size_ = 0;
  uint64_t written_ = 0;  // bytes of the file written, header included
  uint32_t crc_ = 0;      // of the bytes after the header so far
};

class ReplicaStore {
 public:
    // A copy announced with `header` and `bytes` in all: checks the header against the size
  // (snapshot::CheckHeader; kDataLoss/kNotFound name the copy), creates its memory file at that
  // size and maps it (kInternal with errno's text: the node is out of memory).
  Result<IncomingCopy> Begin(const snapshot::SlotHeader& header, uint64_t bytes);
  // Keeps a whole copy: kDataLoss when it is short or its CRC-32C disagrees with its header
  // (nothing is kept); then it is sealed and kept, and copies it makes unneeded are dropped.
  Status Keep(IncomingCopy copy);
  // Duplicates of the kept copies' descriptors (close-on-exec), oldest first.
  Result<std::vector<UniqueFd>> Descriptors() const;
  // What is kept, oldest first, and its bytes.
  std::vector<snapshot::SlotHeader> Held() const;
  uint64_t bytes() const;

 private:
  struct Copy {
    UniqueFd fd;
    snapshot::SlotHeader header{};
    uint64_t bytes = 0;
  };
  mutable std::mutex mu_;
  std::vector<Copy> copies_;  // in arrival order
};

}  // namespace dslaunch::agent::replica
