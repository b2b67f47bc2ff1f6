#include "agent/progress/progress_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/unique_fd.h"

namespace dslaunch::agent {
namespace {

// The text of the file at `path`, at most kMaxProgressReportBytes + 1 bytes (one more than a
// report may have, so that the parser can tell a report that is too long). Never blocks: a FIFO
// put in the file's place is refused, as is a symbolic link.
Result<std::string> ReadReport(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cannot open it", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("cannot stat it", errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError("it is not a regular file");
  std::string text(kMaxProgressReportBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read it", errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

std::string ProgressFileName(int rank, int generation) { return WorkerFileName(rank, generation, "progress"); }

Result<std::string> CreateProgressFile(const JobLogDir& dir, int rank, int generation) {
  const std::string name = ProgressFileName(rank, generation);
  DSLAUNCH_ASSIGN_OR_RETURN(UniqueFd fd, dir.CreateFile(name));
  return std::filesystem::absolute(dir.path() + "/" + name).string();
}

bool ProgressFiles::Signature::operator==(const Signature& o) const {
  return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size &&
         mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
}

ProgressFiles::Signature ProgressFiles::Stat(const std::string& path) {
  struct stat st {};
  Signature s;
  if (::lstat(path.c_str(), &st) != 0) return s;  // gone (or unreachable): no state to compare
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime = st.st_mtim;
  return s;
}

void ProgressFiles::Watch(int rank, std::string path) {
  File f;
  f.last = Stat(path);
  f.path = std::move(path);
  files_[rank] = std::move(f);
}

std::optional<ProgressFileEvent> ProgressFiles::PollOne(int rank, File& file) {
  const Signature now = Stat(file.path);
  if (now == file.last) return std::nullopt;
  file.last = now;
  const std::string where = "rank " + std::to_string(rank) + ": progress file '" + file.path + "'";
  const auto warn_once = [&](ProgressFileEvent& e, const std::string& what) {
    if (file.warned) return;
    file.warned = true;
    e.warning = where + what;
  };
  if (!now.exists) {
    ProgressFileEvent removed{rank, std::nullopt, std::nullopt};
    warn_once(removed, " was removed; no report from this rank is seen until the file is written again");
    if (!removed.warning) return std::nullopt;
    return removed;
  }
  ProgressFileEvent r{rank, ProgressReport{}, std::nullopt};
  Result<std::string> text = ReadReport(file.path);
  if (!text.ok()) {
    warn_once(r, ": " + text.status().message() + "; the write still counts as progress");
    return r;
  }
  Result<ProgressReport> parsed = ParseProgressReport(*text);
  if (!parsed.ok()) {
    warn_once(r, ": " + parsed.status().message() + "; the write still counts as progress");
    return r;
  }
  r.report = *parsed;
  return r;
}

std::vector<ProgressFileEvent> ProgressFiles::Poll() {
  std::vector<ProgressFileEvent> out;
  for (auto& [rank, file] : files_) {
    if (auto r = PollOne(rank, file)) out.push_back(std::move(*r));
  }
  return out;
}

std::optional<ProgressFileEvent> ProgressFiles::Finish(int rank) {
  auto it = files_.find(rank);
  if (it == files_.end()) return std::nullopt;
  auto r = PollOne(rank, it->second);
  files_.erase(it);
  return r;
}

}  // namespace dslaunch::agent
