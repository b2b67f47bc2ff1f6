// AlignedBuffer: host memory whose address and size are multiples of an alignment, as O_DIRECT
// reads and writes need (docs/offload.md, "Alignment"). Move-only; owns its memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace dslaunch::runtime::swap {

// The alignment used when the file system does not say (statx without STATX_DIOALIGN, tmpfs):
// 4096 is a multiple of every common logical block size (512 and 4096 bytes).
inline constexpr uint64_t kDefaultDirectIoAlignment = 4096;

// `bytes` rounded up to a multiple of `alignment` (> 0).
constexpr uint64_t AlignUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `bytes` rounded up to `alignment`, zero-filled. Errors: alignment not a power of two or
  // below sizeof(void*) (kInvalidArgument), out of memory (kInternal, naming the bytes).
  static Result<AlignedBuffer> Allocate(uint64_t bytes, uint64_t alignment);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }  // the rounded size
  uint64_t alignment() const { return alignment_; }
  std::span<std::byte> bytes() const { return {data_, static_cast<size_t>(size_)}; }

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t alignment_ = 0;
};

// The O_DIRECT alignment of the regular file at `path`: statx's STATX_DIOALIGN alignments (Linux
// 6.1+; the larger of the offset and memory ones) when the file system reports them, else
// kDefaultDirectIoAlignment. Never below 512.
uint64_t DirectIoAlignment(const std::string& path);

}  // namespace dslaunch::runtime::swap
