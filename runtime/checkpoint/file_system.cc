#include "runtime/checkpoint/file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "runtime/checkpoint/names.h"

namespace dslaunch::runtime {
namespace {

namespace stdfs = std::filesystem;

// Bytes per write(2) call: large enough for the disk's rate, small enough to stay interruptible.
constexpr size_t kWriteChunkBytes = size_t{8} << 20;

Status ErrorCodeStatus(const std::string& what, const std::error_code& ec) {
  return ErrnoError(what, ec.value());
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(const void* data, size_t n) override {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min(n, kWriteChunkBytes));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return ErrnoError("write " + path_, w < 0 ? errno : EIO);
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoError("fsync " + path_, errno);
    return Status::Ok();
  }

  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return ErrnoError("close " + path_, errno);
    return Status::Ok();
  }

 private:
  int fd_;
  const std::string path_;
};

class PosixFileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("create " + path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoError("rename " + from + " to " + to, errno);
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("remove " + path, errno);
    return Status::Ok();
  }

  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    stdfs::remove_all(path, ec);
    return ec ? ErrorCodeStatus("remove " + path, ec) : Status::Ok();
  }

  Status CreateDirectories(const std::string& path) override {
    std::error_code ec;
    stdfs::create_directories(path, ec);
    return ec ? ErrorCodeStatus("create directory " + path, ec) : Status::Ok();
  }

  Status SyncDirectory(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open directory " + path, errno);
    const int synced = ::fsync(fd);
    const int e = errno;
    ::close(fd);
    return synced == 0 ? Status::Ok() : ErrnoError("fsync directory " + path, e);
  }

  Result<std::vector<std::string>> ListDirectory(const std::string& path) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& entry : stdfs::directory_iterator(path, ec)) names.push_back(entry.path().filename().string());
    if (ec) return ErrorCodeStatus("list " + path, ec);
    return names;
  }

  bool Exists(const std::string& path) override {
    std::error_code ec;
    return stdfs::exists(path, ec);
  }
};

}  // namespace

FileSystem& LocalFileSystem() {
  static PosixFileSystem* const fs = new PosixFileSystem();  // stateless; never destroyed
  return *fs;
}

Status WriteFileDurably(FileSystem& fs, const std::string& path, std::string_view bytes) {
  const stdfs::path target(path);
  const std::string tmp = (target.parent_path() / TemporaryFileName(target.filename().string())).string();
  auto write = [&]() -> Status {
    DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs.NewWritableFile(tmp));
    DSLAUNCH_RETURN_IF_ERROR(file->Append(bytes.data(), bytes.size()));
    DSLAUNCH_RETURN_IF_ERROR(file->Sync());
    DSLAUNCH_RETURN_IF_ERROR(file->Close());
    return fs.Rename(tmp, path);
  };
  if (Status s = write(); !s.ok()) {
    fs.RemoveFile(tmp).IgnoreError();
    return s;
  }
  std::string dir = target.parent_path().string();
  return fs.SyncDirectory(dir.empty() ? "." : dir);
}

}  // namespace dslaunch::runtime
