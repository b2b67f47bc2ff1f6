// Test support for the proc and cluster tiers: small checks on what real processes left behind.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {

inline bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// How often `what` occurs in `text`, without overlaps (a line printed once, not once per rank).
inline size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// A whole file's bytes; "" when it cannot be read (also a /proc file of a process that is gone).
// Plain read(2): a /proc file whose process exits during the read fails with ESRCH, which
// std::ifstream's iterators turn into an exception (a flaky "basic_filebuf::underflow" failure).
inline std::string ReadWhole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.clear();  // the process went away mid-read: as if it were gone already
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Checks that `dir` holds `expected_pids` pid files (env_check --pid_dir) and that none of those
// processes is alive.
inline void CheckNoWorkerAlive(const std::string& dir, size_t expected_pids) {
  std::vector<pid_t> pids = ReadPidFiles(dir);
  CHECK(pids.size() == expected_pids);
  for (pid_t pid : pids) {
    CAPTURE(pid);
    CHECK_FALSE(ProcessAlive(pid));
  }
}

}  // namespace dslaunch::testing
