#include "runtime/swap/swap_file.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/swap/aligned_buffer.h"

namespace dslaunch::runtime::swap {
namespace {

int DefaultOpen(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }

Status OpenError(const std::string& path, int err) {
  if (err == EEXIST) {
    return FailedPreconditionError("swap file '" + path + "' exists already; another swap file of this process has the same name");
  }
  return ErrnoError("create swap file '" + path + "'", err);
}

// Reserves the file's blocks now, so that a full disk shows at start rather than mid-step.
Status Reserve(int fd, const std::string& path, uint64_t bytes) {
  if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return Status::Ok();
  int err = errno;
  if (err == ENOSPC) {
    return FailedPreconditionError("swap file '" + path + "': no space for " + std::to_string(bytes) +
                                   " bytes; free space or point nvme_path at a larger disk");
  }
  if (err != EOPNOTSUPP) return ErrnoError("reserve " + std::to_string(bytes) + " bytes for '" + path + "'", err);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return ErrnoError("size swap file '" + path + "' to " + std::to_string(bytes) + " bytes", errno);
  }
  return Status::Ok();
}

}  // namespace

Result<SwapFile> SwapFile::Create(const SwapFileOptions& o) {
  DSLAUNCH_CHECK(o.record_bytes > 0 && o.record_count > 0) << o.record_bytes << " bytes x " << o.record_count;
  OpenFileFn open_file = o.open_file ? o.open_file : &DefaultOpen;
  std::string dir = SwapDirectory(o.nvme_path);
  SwapFile f;
  f.path_ = dir + "/" + FormatSwapFileName({o.kind, o.rank, static_cast<long>(::getpid())});
  constexpr int kFlags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = -1;
  // The last file to go takes the directory with it (Remove), so another process may remove it
  // between this mkdir and the open: then once more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("create '" + dir + "'", errno);
    fd = open_file(f.path_.c_str(), kFlags | O_DIRECT, 0600);
    if (fd >= 0 || errno != ENOENT) break;
  }
  f.direct_ = fd >= 0;
  if (fd < 0 && errno == EINVAL) {
    fd = open_file(f.path_.c_str(), kFlags, 0600);
    if (fd >= 0) {
      f.warning_ = "swap file '" + f.path_ + "': the file system refused O_DIRECT (" + std::strerror(EINVAL) +
                   "); swap I/O goes through the page cache with pread/pwrite, which is slower and uses memory";
    }
  }
  if (fd < 0) return OpenError(f.path_, errno);
  f.fd_.Reset(fd);
  // Nobody else can hold the lock of a file this process just created with O_EXCL.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Status s = ErrnoError("lock swap file '" + f.path_ + "'", errno);
    f.Remove();
    return s;
  }
  f.alignment_ = f.direct_ ? DirectIoAlignment(f.path_) : kDefaultDirectIoAlignment;
  f.record_bytes_ = o.record_bytes;
  f.record_count_ = o.record_count;
  f.record_stride_ = AlignUp(o.record_bytes, f.alignment_);
  if (Status s = Reserve(fd, f.path_, f.file_bytes()); !s.ok()) {
    f.Remove();
    return s;
  }
  return f;
}

SwapFile& SwapFile::operator=(SwapFile&& o) noexcept {
  if (this != &o) {
    Remove();
    fd_ = std::move(o.fd_);
    path_ = std::move(o.path_);
    o.path_.clear();
    direct_ = o.direct_;
    alignment_ = o.alignment_;
    record_bytes_ = o.record_bytes_;
    record_count_ = o.record_count_;
    record_stride_ = o.record_stride_;
    warning_ = std::move(o.warning_);
  }
  return *this;
}

SwapFile::~SwapFile() { Remove(); }

void SwapFile::Remove() {
  // Unlink before close: the name goes while this process still holds the lock, so a sweeping
  // process never sees an unlocked file of a live run.
  if (fd_.valid() && !path_.empty()) {
    ::unlink(path_.c_str());
    // The swap sub-directory goes with its last file (rmdir refuses while others remain).
    ::rmdir(path_.substr(0, path_.rfind('/')).c_str());
  }
  fd_.Reset();
  path_.clear();
}

uint64_t SwapFile::RecordOffset(uint64_t index) const {
  DSLAUNCH_CHECK(index < record_count_) << "record " << index << " of " << record_count_;
  return index * record_stride_;
}

}  // namespace dslaunch::runtime::swap

