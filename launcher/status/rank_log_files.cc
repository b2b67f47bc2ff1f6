#include "launcher/status/rank_log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

namespace dslaunch::launcher {
namespace {

// What a file that is not a regular one is, for the error.
std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

constexpr char kOnlyRegular[] =
    ": dslaunch logs reads only the regular files the agent writes; remove it, or read it yourself if you "
    "placed it there";

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::vector<std::string> RankLogFiles(const std::string& dir, int rank) {
  const std::string prefix = "rank" + std::to_string(rank) + ".";
  constexpr std::string_view kStdout = "stdout.log";
  int best = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(kStdout) || name.size() < prefix.size() + kStdout.size()) continue;
    // Between "rankN." and "stdout.log": nothing (generation 0) or "genG.".
    const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - kStdout.size());
    int gen = 0;
    if (!middle.empty()) {
      if (!middle.starts_with("gen") || !middle.ends_with(".") || middle.size() < 5) continue;
      const char* first = middle.data() + 3;
      const char* last = middle.data() + middle.size() - 1;
      auto [end, parse_ec] = std::from_chars(first, last, gen);
      if (parse_ec != std::errc() || end != last || gen < 0) continue;
    }
    best = std::max(best, gen);
  }
  if (best < 0) return {};
  const std::string stem = dir + "/" + prefix + (best == 0 ? "" : "gen" + std::to_string(best) + ".");
  return {stem + "stdout.log", stem + "stderr.log"};
}

Result<LogTail> ReadLogTail(const std::string& path, size_t lines, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a link is refused (ELOOP).
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError("'" + path + "' does not exist");
    if (err == ELOOP) return FailedPreconditionError("'" + path + "' is a symbolic link" + kOnlyRegular);
    return InternalError("cannot open '" + path + "': " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return InternalError("cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return FailedPreconditionError("'" + path + "' is " + KindOf(st.st_mode) + kOnlyRegular);
  LogTail tail;
  tail.file_bytes = static_cast<uint64_t>(st.st_size);
  const uint64_t from = tail.file_bytes > max_bytes ? tail.file_bytes - max_bytes : 0;
  tail.cut = from > 0;
  std::string data(static_cast<size_t>(tail.file_bytes - from), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd.get(), data.data() + got, data.size() - got, static_cast<off_t>(from + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InternalError("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;  // truncated since the fstat
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  size_t start = 0;
  if (tail.cut) {  // the first line is partial: start at the next one
    const size_t nl = data.find('\n');
    start = nl == std::string::npos ? data.size() : nl + 1;
  }
  std::vector<std::string_view> all;
  for (size_t at = start; at < data.size();) {
    const size_t nl = data.find('\n', at);
    const size_t end = nl == std::string::npos ? data.size() : nl;
    all.emplace_back(data.data() + at, end - at);
    at = end + 1;
  }
  const size_t first = lines == 0 || lines >= all.size() ? 0 : all.size() - lines;
  for (size_t i = first; i < all.size(); ++i) {
    tail.text.append(all[i]);
    tail.text += '\n';
  }
  return tail;
}

}  // namespace dslaunch::launcher
