// Test support: run a program as a child process, capture its output, signal it, wait for it with
// a deadline. Used by the proc tests that start the real dslaunch binaries.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dslaunch::testing {

struct ProcessResult {
  int exit_code = -1;  // shell convention: 128+N for signal N; -1 if it did not end in time
  std::string out;
  std::string err;
  double seconds = 0;
};

class Subprocess {
 public:
  // Starts argv[0] with stdout/stderr captured. `env_overrides` are "NAME=VALUE" added to the
  // current environment.
  explicit Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env_overrides = {});
  ~Subprocess();  // kills the child (SIGKILL) if it is still running

  pid_t pid() const { return pid_; }
  void Signal(int sig) const;
  // Waits until the child exits or `timeout` passes (then kills it and returns exit_code -1).
  ProcessResult Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::chrono::steady_clock::time_point start_;
  bool done_ = false;
};

ProcessResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::vector<std::string>& env_overrides = {});

// True if a process with this pid exists and is not a zombie.
bool ProcessAlive(pid_t pid);
// True if none of these processes is alive (ProcessAlive).
bool AllDead(const std::vector<pid_t>& pids);

// Reads every "*.pid" file in `dir` (one pid each).
std::vector<pid_t> ReadPidFiles(const std::string& dir);

// A fresh empty directory under $TMPDIR (or /tmp), or under `parent`, removed by the destructor.
class TempDir {
 public:
  TempDir();
  explicit TempDir(const std::string& parent);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace dslaunch::testing
