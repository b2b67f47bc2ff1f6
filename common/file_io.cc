#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace dslaunch {

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path, errno);
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return ErrnoError("read " + path, e);
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create " + tmp, errno);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError("write " + tmp, e);
    }
    off += static_cast<size_t>(n);
  }
  const int synced = ::fsync(fd);
  const int sync_errno = errno;
  const int closed = ::close(fd);
  if (synced != 0 || closed != 0) {
    const int e = synced != 0 ? sync_errno : errno;
    ::unlink(tmp.c_str());
    return ErrnoError("fsync/close " + tmp, e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("rename " + tmp + " to " + path, e);
  }
  return Status::Ok();
}

Status FsyncDirectory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open directory " + path, errno);
  const int synced = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (synced != 0) return ErrnoError("fsync directory " + path, e);
  return Status::Ok();
}

}  // namespace dslaunch
