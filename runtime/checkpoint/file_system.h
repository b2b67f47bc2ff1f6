// FileSystem: the file operations a checkpoint save makes (docs/checkpoint.md, "Saving"), behind
// one interface, so that tests can wrap it and make any of them fail or crash the process
// (runtime/checkpoint/fault_injecting_file_system.h). LocalFileSystem() is the real one (POSIX
// calls). Loading reads through SafetensorsFile and ReadFile directly: nothing there needs faults.
//
// Errors name the operation and the path with errno's text ("create P", "write P", "fsync P",
// "close P", "rename A to B", "fsync directory D", ...: common/status.h ErrnoError).
// Implementations are thread-safe: an asynchronous save writes its shard on a background thread
// while rank 0's thread may create directories.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

// A file open for sequential writing. Not thread-safe; used by one thread at a time.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends `n` bytes (all of them, or an error).
  virtual Status Append(const void* data, size_t n) = 0;
  // fsync: the bytes appended so far survive a power loss.
  virtual Status Sync() = 0;
  // Closes the file; the destructor closes it too, ignoring errors.
  virtual Status Close() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates `path` (mode 0644), or truncates an existing file, for writing.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // rename(2): replaces `to` atomically.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes one file; OK when it does not exist.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes a directory tree (or a file); OK when it does not exist.
  virtual Status RemoveAll(const std::string& path) = 0;
  // mkdir -p.
  virtual Status CreateDirectories(const std::string& path) = 0;
  // fsync of a directory: makes the entries created or renamed in it durable.
  virtual Status SyncDirectory(const std::string& path) = 0;
  // The names of a directory's entries (without "." and ".."), in no particular order.
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The real file system. Stateless; lives for the whole process.
FileSystem& LocalFileSystem();

// Forwards every call to `target` (which must outlive it): a base for wrappers that change a few.
class FileSystemWrapper : public FileSystem {
 public:
  explicit FileSystemWrapper(FileSystem& target) : target_(target) {}
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_.NewWritableFile(path);
  }
  Status Rename(const std::string& from, const std::string& to) override { return target_.Rename(from, to); }
  Status RemoveFile(const std::string& path) override { return target_.RemoveFile(path); }
  Status RemoveAll(const std::string& path) override { return target_.RemoveAll(path); }
  Status CreateDirectories(const std::string& path) override { return target_.CreateDirectories(path); }
  Status SyncDirectory(const std::string& path) override { return target_.SyncDirectory(path); }
  Result<std::vector<std::string>> ListDirectory(const std::string& path) override {
    return target_.ListDirectory(path);
  }
  bool Exists(const std::string& path) override { return target_.Exists(path); }

 protected:
  FileSystem& target() { return target_; }

 private:
  FileSystem& target_;
};

// Writes a small file so that readers see the old contents or the new, never a part, and the new
// entry survives a power loss: PATH.tmp (names.h: TemporaryFileName) is written, fsynced, closed
// and renamed over PATH, then PATH's directory is fsynced. On failure PATH.tmp is removed and
// PATH is left as it was.
Status WriteFileDurably(FileSystem& fs, const std::string& path, std::string_view bytes);

}  // namespace dslaunch::runtime
