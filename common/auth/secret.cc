#include "common/auth/secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/auth/sha256.h"
#include "common/unique_fd.h"

namespace dslaunch {
namespace {

bool ReadUrandom(char* out, size_t n) {
  UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd.get(), out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t r = ::write(fd, data.data(), data.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("write " + path, errno);
    data.remove_prefix(static_cast<size_t>(r));
  }
  return Status::Ok();
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;  // ENOSYS on an ancient kernel: fall back below.
    got += static_cast<size_t>(r);
  }
  if (got < n) {
    DSLAUNCH_CHECK(ReadUrandom(out.data() + got, n - got)) << "no randomness source (getrandom and "
                                                              "/dev/urandom both failed)";
  }
  return out;
}

std::string GenerateSecret() { return HexEncode(RandomBytes(kSecretRandomBytes)); }

Status WriteSecretFile(const std::string& path, std::string_view secret) {
  if (secret.empty()) return InvalidArgumentError("refusing to write an empty secret to " + path);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoError("create secret file " + path, errno);
  auto fail = [&](Status s) {
    fd.Reset();
    ::unlink(path.c_str());
    return s;
  };
  // The umask can only remove bits, but be explicit: the mode is part of the contract.
  if (::fchmod(fd.get(), 0600) != 0) return fail(ErrnoError("chmod 0600 " + path, errno));
  Status st = WriteAll(fd.get(), secret, path);
  if (!st.ok()) return fail(st);
  if (::fsync(fd.get()) != 0) return fail(ErrnoError("fsync " + path, errno));
  if (::close(fd.Release()) != 0) return fail(ErrnoError("close " + path, errno));
  // Make the new directory entry durable too.
  std::string dir = DirectoryOf(path);
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.valid()) ::fsync(dir_fd.get());
  return Status::Ok();
}

Result<std::string> ReadSecretFile(const std::string& path) {
  // Symbolic links are followed: a mounted Kubernetes Secret's files are links into ..data/ (the
  // kubelet swaps that link to update them). The checks below apply to the file actually opened.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open secret file " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("stat secret file " + path, errno);
  if (!S_ISREG(st.st_mode))
    return FailedPreconditionError("secret file " + path + " is not a regular file");
  if ((st.st_mode & 0007) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPreconditionError("secret file " + path + " is accessible by others (mode " +
                                   mode + "); chmod o-rwx it");
  }
  if (static_cast<size_t>(st.st_size) > kMaxSecretFileBytes) {
    return FailedPreconditionError("secret file " + path + " is " + std::to_string(st.st_size) +
                                   " bytes, more than the limit of " +
                                   std::to_string(kMaxSecretFileBytes));
  }
  std::string out;
  char buf[512];
  for (;;) {
    ssize_t r = ::read(fd.get(), buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("read secret file " + path, errno);
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
    if (out.size() > kMaxSecretFileBytes) {
      return FailedPreconditionError("secret file " + path + " grew past the limit while reading");
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  if (out.empty()) return InvalidArgumentError("secret file " + path + " is empty");
  return out;
}

}  // namespace dslaunch
