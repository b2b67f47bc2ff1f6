#include "agent/workers/log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "common/error_record.h"
#include "common/job_id.h"

namespace dslaunch::agent {
namespace {

// Directories the agent creates: only their owner may enter them (logs may hold secrets a
// program printed).
constexpr mode_t kPrivateDirMode = 0700;
// Log files: readable and writable by their owner only.
constexpr mode_t kLogFileMode = 0600;
// Permission bits that let others than the owner add, remove or replace entries.
constexpr mode_t kWritableByOthers = S_IWGRP | S_IWOTH;

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// mkdir that is fine with an existing entry (checked by the caller once opened).
Status MakeDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), kPrivateDirMode) == 0 || errno == EEXIST) return Status::Ok();
  return ErrnoError("cannot create log directory " + Quote(path), errno);
}

// Opens `path` as a directory without following a symbolic link at its last component, and
// checks that `uid` owns it; with `private_base`, also that nobody else may write to it.
Result<UniqueFd> OpenOwnDirectory(const std::string& path, uid_t uid, bool private_base) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return FailedPreconditionError("log directory " + Quote(path) +
                                     " is not a directory (a symbolic link or a file): remove it, or choose "
                                     "another place with --log_dir");
    }
    return ErrnoError("cannot open log directory " + Quote(path), err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("stat log directory " + Quote(path), errno);
  if (st.st_uid != uid) {
    return FailedPreconditionError("log directory " + Quote(path) + " belongs to uid " + std::to_string(st.st_uid) +
                                   ", not to this user (uid " + std::to_string(uid) +
                                   "): another user created it; remove it, or choose another place with --log_dir");
  }
  if (private_base && (st.st_mode & kWritableByOthers) != 0) {
    return FailedPreconditionError("log directory " + Quote(path) + " is writable by other users (mode " +
                                   Octal(st.st_mode) + "): run 'chmod go-w " + path +
                                   "', or choose another place with --log_dir");
  }
  return fd;
}

}  // namespace

std::string WorkerFileName(int rank, int generation, std::string_view suffix) {
  std::string name = "rank" + std::to_string(rank);
  if (generation > 0) name += ".gen" + std::to_string(generation);
  name += '.';
  name += suffix;
  return name;
}

std::string ReadErrorRecord(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return "";
  std::string text(kMaxErrorRecordBytes, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

std::string DefaultLogBase(const std::string& runtime_dir, uid_t uid) {
  return runtime_dir + "/dslaunch-" + std::to_string(uid);
}

Result<JobLogDir> JobLogDir::Open(const LogDirRequest& request) {
  Status valid = ValidateJobId(request.job_id);
  if (!valid.ok()) return valid.WithContext("log directory");
  std::string path = request.log_dir;
  if (path.empty()) {
    const std::string base = DefaultLogBase(request.runtime_dir, request.uid);
    DSLAUNCH_RETURN_IF_ERROR(MakeDirectory(base));
    DSLAUNCH_RETURN_IF_ERROR(OpenOwnDirectory(base, request.uid, /*private_base=*/true).status());
    path = base + "/" + request.job_id;
  } else {
    // --log_dir is the user's choice: its parents are created as any mkdir -p would.
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return ErrnoError("cannot create log directory " + Quote(parent.string()), ec.value());
  }
  DSLAUNCH_RETURN_IF_ERROR(MakeDirectory(path));
  DSLAUNCH_ASSIGN_OR_RETURN(UniqueFd fd, OpenOwnDirectory(path, request.uid, /*private_base=*/false));
  return JobLogDir(std::move(path), request.job_id, std::move(fd));
}

Result<UniqueFd> JobLogDir::CreateFile(const std::string& name) const {
  const std::string file = path_ + "/" + name;
  int fd = ::openat(fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                    kLogFileMode);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) {
      return FailedPreconditionError("log file " + Quote(file) + " already exists: job id " + Quote(job_id_) +
                                     " was used before on this node; choose another --job_id, or move " +
                                     Quote(path_) + " away");
    }
    return ErrnoError("cannot create log file " + Quote(file), err);
  }
  return UniqueFd(fd);
}

Result<JobLogDir::WorkerLogs> JobLogDir::CreateWorkerLogs(int rank, int generation) const {
  WorkerLogs l;
  const std::string out_name = WorkerFileName(rank, generation, "stdout.log");
  DSLAUNCH_ASSIGN_OR_RETURN(l.out, CreateFile(out_name));
  l.out_path = path_ + "/" + out_name;
  const std::string err_name = WorkerFileName(rank, generation, "stderr.log");
  DSLAUNCH_ASSIGN_OR_RETURN(l.err, CreateFile(err_name));
  l.err_path = path_ + "/" + err_name;
  std::error_code ec;
  l.error_file = std::filesystem::absolute(path_ + "/" + WorkerFileName(rank, generation, "error.json"), ec).string();
  ::unlink(l.error_file.c_str());
  return l;
}

}  // namespace dslaunch::agent
