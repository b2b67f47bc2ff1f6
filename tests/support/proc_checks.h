// Test support for the proc and cluster tiers: small checks on what real processes left behind.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {

inline bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// A whole file's bytes; "" when it cannot be read (also a /proc file of a process that is gone).
inline std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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
