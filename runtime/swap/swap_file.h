// SwapFile: one file of fixed-size records under nvme_path, one record per sub-group
// (docs/offload.md, "Swap-file layout"). Record i lies at offset i * record_stride(); the stride is
// the record size rounded up to the file's O_DIRECT alignment, so every record can be read and
// written with O_DIRECT and aligned buffers.
//
// The file is opened with O_DIRECT. Where the file system refuses O_DIRECT (open fails with
// EINVAL: tmpfs before Linux 6.6, some network file systems) it is reopened without, I/O goes
// through the page cache, and warning() says so: the caller prints it once; it is never silent.
// The owner holds an exclusive flock while the file is open (how RemoveStaleSwapFiles tells a
// live run's file from a crashed one's); the destructor closes and removes the file.
// Not thread-safe; the fd may be used for concurrent I/O to distinct records.
#pragma once

#include <fcntl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "runtime/swap/swap_file_name.h"

namespace dslaunch::runtime::swap {

// open(2) as a seam: tests pass one that refuses O_DIRECT, as tmpfs does on older kernels.
using OpenFileFn = int (*)(const char* path, int flags, mode_t mode);

struct SwapFileOptions {
  std::string nvme_path;  // the directory given by the config; the file goes in its swap sub-directory
  SwapKind kind = SwapKind::kOptimizer;
  int rank = 0;
  uint64_t record_bytes = 0;  // the largest sub-group's bytes (> 0)
  uint64_t record_count = 0;  // sub-groups (> 0)
  OpenFileFn open_file = nullptr;  // nullptr: ::open
};

class SwapFile {
 public:
  // Creates <nvme_path>/dslaunch-swap/<kind>.rank<R>.pid<P>.swp (the swap sub-directory too; the
  // last file removed takes it with it),
  // reserves record_count * record_stride bytes (fallocate; ftruncate where unsupported). Errors
  // name the path: it exists already (another process of this pid? kFailedPrecondition), no space
  // (kFailedPrecondition with the bytes), others kInternal with errno's text.
  static Result<SwapFile> Create(const SwapFileOptions& options);

  SwapFile(SwapFile&&) noexcept = default;
  SwapFile& operator=(SwapFile&&) noexcept;
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;
  ~SwapFile();

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t record_bytes() const { return record_bytes_; }
  uint64_t record_count() const { return record_count_; }
  uint64_t record_stride() const { return record_stride_; }
  uint64_t file_bytes() const { return record_stride_ * record_count_; }
  // Offset of record `index`; DSLAUNCH_CHECKs index < record_count().
  uint64_t RecordOffset(uint64_t index) const;
  // Set when O_DIRECT was refused: one line naming the file and the reason.
  const std::optional<std::string>& warning() const { return warning_; }

 private:
  SwapFile() = default;
  void Remove();

  UniqueFd fd_;
  std::string path_;
  bool direct_ = false;
  uint64_t alignment_ = 0;
  uint64_t record_bytes_ = 0;
  uint64_t record_count_ = 0;
  uint64_t record_stride_ = 0;
  std::optional<std::string> warning_;
};

}  // namespace dslaunch::runtime::swap
