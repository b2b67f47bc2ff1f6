#include "agent/workers/log_writer.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace dslaunch::agent {
namespace {

// `n` lines of `width` bytes each, newline included.
std::string Lines(int n, size_t width) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(width - 1, 'a' + static_cast<char>(i % 26)) + "\n";
  return s;
}

TEST_CASE("LogWriter appends whole blocks and reports nothing while writes succeed") {
  char path[] = "/tmp/dslaunch-log-writer-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  LogWriter w(UniqueFd(fd), path);
  CHECK_FALSE(w.Append("one\ntwo\n").has_value());
  CHECK_FALSE(w.Append("three\n").has_value());
  CHECK_FALSE(w.lost());
  CHECK(w.lost_bytes() == 0);
  CHECK(w.lost_lines() == 0);
  CHECK(w.first_error().empty());
  char buf[32] = {};
  const int in = ::open(path, O_RDONLY);
  REQUIRE(in >= 0);
  CHECK(::read(in, buf, sizeof(buf)) == 14);
  CHECK(std::string(buf) == "one\ntwo\nthree\n");
  ::close(in);
  ::unlink(path);
}

TEST_CASE("LogWriter on a full device reports the first failure once and counts every lost line") {
  // /dev/full: every write fails with ENOSPC, as on a full file system.
  const int fd = ::open("/dev/full", O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  LogWriter w(UniqueFd(fd), "/logs/job/rank1.stdout.log");
  // An empty line is a line too.
  std::optional<Status> first = w.Append("\nbb\n");
  REQUIRE(first.has_value());
  CHECK(first->message() == "cannot write log file '/logs/job/rank1.stdout.log': No space left on device");
  CHECK(w.first_error() == "No space left on device");
  CHECK(w.lost());
  CHECK(w.lost_bytes() == 4);
  CHECK(w.lost_lines() == 2);
  // Later failures are counted, not reported again.
  CHECK_FALSE(w.Append("ccc\n").has_value());
  CHECK(w.lost_bytes() == 8);
  CHECK(w.lost_lines() == 3);
}

TEST_CASE("LogWriter counts a line written in part as lost") {
  // A pipe of one page, non-blocking: the first write takes what fits, the next fails (EAGAIN).
  int p[2];
  REQUIRE(::pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0);
  const int page = static_cast<int>(::sysconf(_SC_PAGESIZE));
  REQUIRE(::fcntl(p[1], F_SETPIPE_SZ, page) == page);
  LogWriter w(UniqueFd(p[1]), "pipe");
  // 100-byte lines: the page ends inside line page / 100 (0-based), which is lost with the rest.
  const std::string block = Lines(100, 100);
  REQUIRE(w.Append(block).has_value());
  CHECK(w.lost_bytes() == block.size() - static_cast<size_t>(page));
  CHECK(w.lost_lines() == static_cast<uint64_t>(100 - page / 100));
  ::close(p[0]);
}

}  // namespace
}  // namespace dslaunch::agent
