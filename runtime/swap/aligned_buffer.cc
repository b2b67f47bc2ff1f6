#include "runtime/swap/aligned_buffer.h"

#include <fcntl.h>
#include <linux/stat.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace dslaunch::runtime::swap {
namespace {

// The smallest logical block size of any block device: a reported alignment below it is noise.
constexpr uint64_t kMinDirectIoAlignment = 512;

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

Result<AlignedBuffer> AlignedBuffer::Allocate(uint64_t bytes, uint64_t alignment) {
  if (!IsPowerOfTwo(alignment) || alignment < sizeof(void*)) {
    return InvalidArgumentError("buffer alignment must be a power of two >= " + std::to_string(sizeof(void*)) +
                                ", got " + std::to_string(alignment));
  }
  AlignedBuffer b;
  b.size_ = AlignUp(bytes, alignment);
  b.alignment_ = alignment;
  if (b.size_ == 0) return b;
  void* p = nullptr;
  if (int err = ::posix_memalign(&p, alignment, b.size_); err != 0) {
    return InternalError("cannot allocate a " + std::to_string(b.size_) + "-byte buffer aligned to " +
                         std::to_string(alignment) + ": " + std::strerror(err));
  }
  std::memset(p, 0, b.size_);
  b.data_ = static_cast<std::byte*>(p);
  return b;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), alignment_(o.alignment_) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    alignment_ = o.alignment_;
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

uint64_t DirectIoAlignment(const std::string& path) {
  struct statx st{};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_DIOALIGN, &st) != 0 || !(st.stx_mask & STATX_DIOALIGN) ||
      st.stx_dio_offset_align == 0) {
    return kDefaultDirectIoAlignment;
  }
  uint64_t a = std::max<uint64_t>({st.stx_dio_offset_align, st.stx_dio_mem_align, kMinDirectIoAlignment});
  return IsPowerOfTwo(a) ? a : kDefaultDirectIoAlignment;
}

}  // namespace dslaunch::runtime::swap
