#include "runtime/swap/swap_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/unique_fd.h"
#include "runtime/swap/swap_file_name.h"

namespace dslaunch::runtime::swap {

std::string DescribeRemoval(const StaleSwapFile& file) {
  return "removed stale swap file '" + file.path + "' (" + std::to_string(file.bytes) +
         " bytes) left by a run that ended without cleaning up";
}

namespace {

std::string Where(std::string_view key, const std::string& path) {
  return std::string(key) + " '" + path + "'";
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Creates and removes a probe file: the only test of writability that holds for root too.
Status ProbeWritable(const std::string& dir, std::string_view key) {
  // The thread too: ranks on threads of one process (the tests' in-process ranks) probe at once.
  std::string probe = dir + "/.dslaunch-probe." + std::to_string(::getpid()) + "." + std::to_string(::gettid());
  UniqueFd fd(::open(probe.c_str(), O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    int err = errno;
    return FailedPreconditionError(Where(key, dir) + ": cannot create files there (" + ErrnoText(err) +
                                   "); point the setting at a writable directory on a local disk");
  }
  fd.Reset();
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace

Status CheckFreeSpace(const std::string& path, uint64_t needed, uint64_t available, std::string_view key) {
  if (available >= needed) return Status::Ok();
  return FailedPreconditionError(Where(key, path) + ": needs " + std::to_string(needed) + " bytes for swap files, " +
                                 std::to_string(available) +
                                 " bytes are free; free space there, point the setting at a larger disk, or use more ranks");
}

Status CheckSwapDirectory(const std::string& nvme_path, uint64_t needed, std::string_view key) {
  if (nvme_path.empty()) return InvalidArgumentError(std::string(key) + ": empty; set it to a directory on a local disk");
  struct stat st{};
  if (::stat(nvme_path.c_str(), &st) != 0) {
    int err = errno;
    return FailedPreconditionError(Where(key, nvme_path) + ": " + ErrnoText(err) +
                                   "; create the directory or point the setting at an existing one");
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(Where(key, nvme_path) + ": not a directory");
  }
  std::string dir = SwapDirectory(nvme_path);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    int err = errno;
    return FailedPreconditionError(Where(key, nvme_path) + ": cannot create '" + dir + "' (" + ErrnoText(err) +
                                   "); point the setting at a writable directory");
  }
  DSLAUNCH_RETURN_IF_ERROR(ProbeWritable(dir, key));
  struct statvfs vfs{};
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    int err = errno;
    return FailedPreconditionError(Where(key, nvme_path) + ": statvfs: " + ErrnoText(err));
  }
  uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return CheckFreeSpace(nvme_path, needed, available, key);
}

Result<std::vector<StaleSwapFile>> RemoveStaleSwapFiles(const std::string& nvme_path) {
  std::vector<StaleSwapFile> removed;
  std::string dir = SwapDirectory(nvme_path);
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) {
    if (errno == ENOENT) return removed;
    return ErrnoError("open swap directory '" + dir + "'", errno);
  }
  while (struct dirent* e = ::readdir(d.get())) {
    const std::optional<SwapFileName> name = ParseSwapFileName(e->d_name);
    if (!name) continue;
    // Another live process of that pid may be between creating its file and locking it
    // (SwapFile::Create), when the lock below would succeed: leave it (a pid reused since leaves
    // the file for a later sweep). This process's own pid (a container restarted with the same
    // pids) proves nothing: it sweeps before it creates, so the lock decides.
    const bool other_live = name->pid != ::getpid() && name->pid > 0 &&
                            (::kill(static_cast<pid_t>(name->pid), 0) == 0 || errno == EPERM);
    if (other_live) continue;
    std::string path = dir + "/" + e->d_name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) continue;  // removed meanwhile, or not a file we may open: leave it
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its owner is alive
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT) continue;  // another rank sharing the directory swept it first
      return ErrnoError("remove stale swap file '" + path + "'", errno);
    }
    removed.push_back({path, static_cast<uint64_t>(st.st_size)});
  }
  return removed;
}

}  // namespace dslaunch::runtime::swap
