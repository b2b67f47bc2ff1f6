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
#include "common/text.h"

namespace dslaunch::runtime {
namespace {

constexpr char kMagic[8] = {'D', 'S', 'L', 'S', 'N', 'A', 'P', '1'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kAlign = 64;  // the tensors start on a cache line

struct SlotHeader {
  char magic[8];
  uint32_t complete;  // 1 once everything after the header is written and checksummed
  uint32_t tensors;
  int64_t step;
  int32_t rank;
  int32_t world;
  uint64_t meta_bytes;
  uint64_t floats_per_tensor;
  uint32_t crc32c;  // of the meta text and the tensors, as laid out
  uint32_t reserved0;
  uint64_t reserved1;
};
static_assert(sizeof(SlotHeader) == kHeaderBytes);

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
size_t TensorsOffset(size_t meta_bytes) { return kHeaderBytes + AlignUp(meta_bytes); }

// The complete flag is the commit: written after everything else, read before anything else.
void SetComplete(std::byte* map, uint32_t value) {
  std::atomic_ref<uint32_t>(reinterpret_cast<SlotHeader*>(map)->complete).store(value, std::memory_order_release);
}

}  // namespace

SnapshotSlot::SnapshotSlot(UniqueFd fd, std::string name) : fd_(std::move(fd)), name_(std::move(name)) {}

SnapshotSlot::~SnapshotSlot() { Unmap(); }

SnapshotSlot::SnapshotSlot(SnapshotSlot&& other) noexcept
    : fd_(std::move(other.fd_)),
      name_(std::move(other.name_)),
      map_(std::exchange(other.map_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)) {}

void SnapshotSlot::Unmap() {
  if (map_ != nullptr) ::munmap(map_, mapped_);
  map_ = nullptr;
  mapped_ = 0;
}

// Maps the file at `size` bytes, resizing it (a memory file's pages are allocated as written).
Status SnapshotSlot::Map(size_t size) {
  if (map_ != nullptr && mapped_ == size) return Status::Ok();
  Unmap();
  if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoError("in-memory snapshot " + name_ + ": resize to " + std::to_string(size) + " bytes", errno);
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (map == MAP_FAILED) return ErrnoError("in-memory snapshot " + name_ + ": map " + std::to_string(size) + " bytes", errno);
  map_ = static_cast<std::byte*>(map);
  mapped_ = size;
  return Status::Ok();
}

Status SnapshotSlot::Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap,
                           const WriteHook& mid_write) {
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
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.tensors = static_cast<uint32_t>(snap.tensors.size());
  h.step = info.step;
  h.rank = info.rank;
  h.world = info.world;
  h.meta_bytes = meta_json.size();
  h.floats_per_tensor = floats;
  h.crc32c = crc;
  std::memcpy(map_, &h, sizeof(h));  // complete is still 0
  SetComplete(map_, 1);
  return Status::Ok();
}

void SnapshotSlot::Clear() {
  if (map_ != nullptr) {
    SetComplete(map_, 0);
    return;
  }
  const uint32_t zero = 0;  // not mapped by this process: clear the flag in the file
  (void)!::pwrite(fd_.get(), &zero, sizeof(zero), offsetof(SlotHeader, complete));
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
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return DataLossError(where + "not a snapshot (bad magic)");
  const size_t tensors_at = TensorsOffset(h.meta_bytes);
  if (h.meta_bytes > size || h.floats_per_tensor > size || tensors_at + h.tensors * h.floats_per_tensor * sizeof(float) != size) {
    return DataLossError(where + "its header records " + std::to_string(h.tensors) + " tensors of " +
                         std::to_string(h.floats_per_tensor) + " elements and " + std::to_string(h.meta_bytes) +
                         " bytes of meta.json, but it holds " + std::to_string(size) + " bytes");
  }
  const uint32_t crc = Crc32c(map_ + kHeaderBytes, size - kHeaderBytes);
  if (crc != h.crc32c) {
    return DataLossError(where + "corrupt: CRC-32C " + Crc32cText(crc) + ", its header records " + Crc32cText(h.crc32c));
  }
  return SnapshotInfo{h.step, h.rank, h.world};
}

std::string_view SnapshotSlot::meta() const {
  const SlotHeader* h = reinterpret_cast<const SlotHeader*>(map_);
  return {reinterpret_cast<const char*>(map_ + kHeaderBytes), h->meta_bytes};
}

std::span<const float> SnapshotSlot::tensor(size_t index) const {
  const SlotHeader* h = reinterpret_cast<const SlotHeader*>(map_);
  const float* first = reinterpret_cast<const float*>(map_ + TensorsOffset(h->meta_bytes));
  return {first + index * h->floats_per_tensor, h->floats_per_tensor};
}

Result<MemorySnapshots> MemorySnapshots::FromEnv(std::string_view value) {
  const Status malformed = InvalidArgumentError("DSLAUNCH_SNAPSHOT_FDS='" + std::string(value) +
                                                "': expected two open descriptors, as the agent passes them (\"7,8\")");
  const std::vector<std::string> parts = SplitText(value, ',');
  if (parts.size() != 2) return malformed;
  std::vector<SnapshotSlot> slots;
  for (const std::string& part : parts) {
    char* end = nullptr;
    const long fd = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || fd < 3 || fd > 1'000'000 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
      return malformed;
    }
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);  // not for this worker's own children
    slots.emplace_back(UniqueFd(static_cast<int>(fd)), "slot " + std::to_string(slots.size()));
  }
  return MemorySnapshots(std::move(slots));
}

size_t MemorySnapshots::bytes() const {
  size_t n = 0;
  for (const SnapshotSlot& s : slots_) n += s.bytes();
  return n;
}

Status MemorySnapshots::Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap) {
  size_t target = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!committed_ || holds_[i] != committed_) {
      target = i;
      break;
    }
  }
  holds_[target].reset();
  DSLAUNCH_RETURN_IF_ERROR(slots_[target].Write(info, meta_json, snap, mid_write_));
  holds_[target] = info.step;
  return Status::Ok();
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
}

}  // namespace dslaunch::runtime
