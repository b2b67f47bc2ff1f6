#include "runtime/checkpoint/memory_snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/crc32c.h"
#include "common/snapshot/slot_header.h"
#include "common/text.h"

namespace dslaunch::runtime {
namespace {

using snapshot::kHeaderBytes;
using snapshot::SlotHeader;
using snapshot::TensorsOffset;

// The complete flag is the commit: written after everything else, read before anything else.
void SetComplete(std::byte* map, uint32_t value) {
  std::atomic_ref<uint32_t>(reinterpret_cast<SlotHeader*>(map)->complete).store(value, std::memory_order_release);
}

}  // namespace

SnapshotSlot::SnapshotSlot(UniqueFd fd, std::string name, Access access)
    : fd_(std::move(fd)), name_(std::move(name)), access_(access) {}

SnapshotSlot::~SnapshotSlot() { Unmap(); }

SnapshotSlot::SnapshotSlot(SnapshotSlot&& other) noexcept
    : fd_(std::move(other.fd_)),
      name_(std::move(other.name_)),
      access_(other.access_),
      map_(std::exchange(other.map_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)) {}

void SnapshotSlot::Unmap() {
  if (map_ != nullptr) ::munmap(map_, mapped_);
  map_ = nullptr;
  mapped_ = 0;
}

// Maps the file at `size` bytes, resizing a writable one (a memory file's pages are allocated as
// written). A read-only slot is mapped as it is (a peer's copy is sealed against writes).
Status SnapshotSlot::Map(size_t size) {
  if (map_ != nullptr && mapped_ == size) return Status::Ok();
  Unmap();
  const bool writable = access_ == Access::kWritable;
  if (writable && ::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoError("in-memory snapshot " + name_ + ": resize to " + std::to_string(size) + " bytes", errno);
  }
  void* map = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_.get(), 0);
  if (map == MAP_FAILED) return ErrnoError("in-memory snapshot " + name_ + ": map " + std::to_string(size) + " bytes", errno);
  map_ = static_cast<std::byte*>(map);
  mapped_ = size;
  return Status::Ok();
}

Status SnapshotSlot::Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap,
                           const WriteHook& mid_write, const SlotOrigin& origin) {
  if (access_ != Access::kWritable) return InternalError("in-memory snapshot " + name_ + " is a peer's copy: read-only");
  const size_t floats = snap.range.size();
  const size_t tensors_at = TensorsOffset(meta_json.size());
  const size_t size = tensors_at + snap.tensors.size() * floats * sizeof(float);
  // Incomplete before the file is resized (which may cut the old tensors), and again once mapped.
  if (map_ != nullptr && mapped_ >= kHeaderBytes) SetComplete(map_, 0);
  DSLAUNCH_RETURN_IF_ERROR(Map(size));
  SetComplete(map_, 0);
  std::memcpy(map_ + kHeaderBytes, meta_json.data(), meta_json.size());
  std::memset(map_ + kHeaderBytes + meta_json.size(), 0, tensors_at - kHeaderBytes - meta_json.size());
  uint32_t crc = Crc32c(map_ + kHeaderBytes, tensors_at - kHeaderBytes);
  // Each tensor copied and checksummed a piece at a time, while the piece is in cache.
  constexpr size_t kPiece = 256 * 1024;  // floats
  std::byte* out = map_ + tensors_at;
  auto append = [&](std::span<const float> piece) {
    for (size_t at = 0; at < piece.size(); at += kPiece) {
      const size_t n = std::min(kPiece, piece.size() - at) * sizeof(float);
      std::memcpy(out, piece.data() + at, n);
      crc = Crc32c(out, n, crc);
      out += n;
    }
  };
  for (size_t i = 0; i < snap.tensors.size(); ++i) {
    std::byte* const start = out;
    if (snap.stream) {
      DSLAUNCH_RETURN_IF_ERROR(snap.stream(i, [&](std::span<const float> piece) {
        if (static_cast<size_t>(out - start) + piece.size_bytes() > floats * sizeof(float)) {
          return InternalError("in-memory snapshot " + name_ + ": tensor " + snap.tensors[i].first +
                               " streamed more than its slice of " + std::to_string(floats) + " elements");
        }
        append(piece);
        return Status::Ok();
      }));
    } else {
      append(snap.tensors[i].second);
    }
    if (static_cast<size_t>(out - start) != floats * sizeof(float)) {
      return InternalError("in-memory snapshot " + name_ + ": tensor " + snap.tensors[i].first + " has " +
                           std::to_string((out - start) / sizeof(float)) + " elements, its slice " +
                           std::to_string(floats));
    }
    if (i == 0 && mid_write) mid_write(info);
  }
  SlotHeader h{};
  std::memcpy(h.magic, snapshot::kMagic, sizeof(snapshot::kMagic));
  h.tensors = static_cast<uint32_t>(snap.tensors.size());
  h.step = info.step;
  h.rank = info.rank;
  h.world = info.world;
  h.meta_bytes = meta_json.size();
  h.floats_per_tensor = floats;
  h.crc32c = crc;
  h.generation = origin.generation;
  h.replicas = origin.replicas;
  h.acked = snapshot::kNotAcked;
  std::memcpy(map_, &h, sizeof(h));  // complete is still 0
  SetComplete(map_, 1);
  return Status::Ok();
}

void SnapshotSlot::Clear() {
  if (access_ != Access::kWritable) return;
  if (map_ != nullptr) {
    SetComplete(map_, 0);
    return;
  }
  const uint32_t zero = 0;  // not mapped by this process: clear the flag in the file
  (void)!::pwrite(fd_.get(), &zero, sizeof(zero), snapshot::kCompleteOffset);
}

Result<SnapshotInfo> SnapshotSlot::Check() {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return ErrnoError("in-memory snapshot " + name_ + ": stat", errno);
  const size_t size = static_cast<size_t>(st.st_size);
  const std::string where = "in-memory snapshot " + name_ + ": ";
  if (size < kHeaderBytes) return NotFoundError(where + "empty");
  DSLAUNCH_RETURN_IF_ERROR(Map(size));
  if (std::atomic_ref<uint32_t>(reinterpret_cast<SlotHeader*>(map_)->complete).load(std::memory_order_acquire) != 1) {
    return NotFoundError(where + "no complete snapshot (a write did not finish)");
  }
  SlotHeader h;
  std::memcpy(&h, map_, sizeof(h));
  DSLAUNCH_RETURN_IF_ERROR(snapshot::CheckHeader(h, size, where));
  const uint32_t crc = Crc32c(map_ + kHeaderBytes, size - kHeaderBytes);
  if (crc != h.crc32c) {
    return DataLossError(where + "corrupt: CRC-32C " + Crc32cText(crc) + ", its header records " + Crc32cText(h.crc32c));
  }
  return SnapshotInfo{h.step, h.rank, h.world};
}

snapshot::Ack SnapshotSlot::ack() const {
  if (map_ == nullptr) return snapshot::Ack::kPending;
  auto* h = reinterpret_cast<SlotHeader*>(map_);
  // The agent writes `acked` into the shared memory while this process reads it.
  const int64_t acked = std::atomic_ref<int64_t>(h->acked).load(std::memory_order_acquire);
  return snapshot::AckOf(acked, h->step);
}

size_t SnapshotSlot::tensors() const { return reinterpret_cast<const SlotHeader*>(map_)->tensors; }

std::string_view SnapshotSlot::meta() const {
  const SlotHeader* h = reinterpret_cast<const SlotHeader*>(map_);
  return {reinterpret_cast<const char*>(map_ + kHeaderBytes), h->meta_bytes};
}

std::span<const float> SnapshotSlot::tensor(size_t index) const {
  const SlotHeader* h = reinterpret_cast<const SlotHeader*>(map_);
  const float* first = reinterpret_cast<const float*>(map_ + TensorsOffset(h->meta_bytes));
  return {first + index * h->floats_per_tensor, h->floats_per_tensor};
}

namespace {

// The descriptors a variable names ("7,8"), each open; kInvalidArgument naming the variable and
// what was expected otherwise. Nothing is taken yet: a refusal closes nothing.
Result<std::vector<int>> InheritedFds(std::string_view name, std::string_view value, std::string_view expected,
                                      std::optional<size_t> count) {
  const Status malformed = InvalidArgumentError(std::string(name) + "='" + std::string(value) + "': expected " +
                                                std::string(expected) + ", as the agent passes them");
  const std::vector<std::string> parts = value.empty() ? std::vector<std::string>() : SplitText(value, ',');
  if (count && parts.size() != *count) return malformed;
  std::vector<int> fds;
  for (const std::string& part : parts) {
    char* end = nullptr;
    const long fd = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || fd < 3 || fd > 1'000'000 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
      return malformed;
    }
    fds.push_back(static_cast<int>(fd));
  }
  return fds;
}

// Takes `fd`, close-on-exec from now on (not for this worker's own children).
UniqueFd TakeInherited(int fd) {
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return UniqueFd(fd);
}

}  // namespace

Result<MemorySnapshots> MemorySnapshots::FromEnv(std::string_view value, std::string_view replica_value) {
  DSLAUNCH_ASSIGN_OR_RETURN(const std::vector<int> own,
                            InheritedFds("DSLAUNCH_SNAPSHOT_FDS", value, "two open descriptors (\"7,8\")", 2));
  DSLAUNCH_ASSIGN_OR_RETURN(
      const std::vector<int> copies,
      InheritedFds("DSLAUNCH_SNAPSHOT_REPLICA_FDS", replica_value, "open descriptors (\"9,10,11\")", std::nullopt));
  std::vector<SnapshotSlot> slots, replicas;
  for (int fd : own) slots.emplace_back(TakeInherited(fd), "slot " + std::to_string(slots.size()));
  for (int fd : copies) {
    replicas.emplace_back(TakeInherited(fd), "peer copy " + std::to_string(replicas.size()),
                          SnapshotSlot::Access::kReadOnly);
  }
  return MemorySnapshots(std::move(slots), std::move(replicas));
}

std::vector<SnapshotSlot*> MemorySnapshots::Readable() {
  std::vector<SnapshotSlot*> all;
  for (SnapshotSlot& s : slots_) all.push_back(&s);
  for (SnapshotSlot& s : replicas_) all.push_back(&s);
  return all;
}

size_t MemorySnapshots::bytes() const {
  size_t n = 0;
  for (const SnapshotSlot& s : slots_) n += s.bytes();
  for (const SnapshotSlot& s : replicas_) n += s.bytes();
  return n;
}

bool MemorySnapshots::Answered(std::optional<int64_t>* failed) {
  if (origin_.replicas == 0 || !latest_) return true;
  switch (slots_[*latest_].ack()) {
    case snapshot::Ack::kPending: return false;
    case snapshot::Ack::kFailed: *failed = holds_[*latest_]; break;
    case snapshot::Ack::kStored: break;
  }
  latest_.reset();
  return true;
}

Status MemorySnapshots::Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap) {
  // Not the newest committed snapshot's slot, nor the pinned one; with one pinned, the committed
  // one if need be (the pinned slot holds an older whole snapshot meanwhile).
  std::optional<size_t> free, unpinned;
  for (size_t i = 0; i < slots_.size() && !free; ++i) {
    if (pinned_ == i) continue;
    unpinned = i;
    if (!committed_ || holds_[i] != committed_) free = i;
  }
  if (!free && !unpinned) return InternalError("in-memory snapshot of step " + std::to_string(info.step) + ": no slot");
  const size_t target = free ? *free : *unpinned;
  holds_[target].reset();
  latest_.reset();
  DSLAUNCH_RETURN_IF_ERROR(slots_[target].Write(info, meta_json, snap, mid_write_, origin_));
  holds_[target] = info.step;
  latest_ = target;
  return Status::Ok();
}

const SnapshotSlot* MemorySnapshots::Pin(int64_t step) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (holds_[i] == step) {
      pinned_ = i;
      return &slots_[i];
    }
  }
  return nullptr;
}

void MemorySnapshots::KeepOnly(std::optional<int64_t> step) {
  bool kept = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (step && !kept) {  // checked only where one is kept: a fresh run clears without reading
      Result<SnapshotInfo> info = slots_[i].Check();
      if (info.ok() && info->step == *step) {
        holds_[i] = *step;
        kept = true;
        continue;
      }
    }
    slots_[i].Clear();
    holds_[i].reset();
  }
  committed_ = kept ? step : std::nullopt;
  latest_.reset();
}

}  // namespace dslaunch::runtime
