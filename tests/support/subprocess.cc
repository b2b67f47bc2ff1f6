#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

extern char** environ;

namespace dslaunch::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env_overrides) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
  // Overrides replace entries of the same name (a duplicate would leave it to each reader which
  // one wins: getenv takes the first).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    bool overridden = false;
    for (const auto& o : env_overrides) {
      if (kv.substr(0, kv.find('=') + 1) == std::string_view(o).substr(0, o.find('=') + 1)) overridden = true;
    }
    if (!overridden) env.emplace_back(kv);
  }
  for (const auto& kv : env_overrides) env.push_back(kv);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& a : env) cenv.push_back(const_cast<char*>(a.c_str()));
  cenv.push_back(nullptr);
  start_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Subprocess::~Subprocess() {
  if (!done_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void Subprocess::Signal(int sig) const { ::kill(pid_, sig); }

ProcessResult Subprocess::Wait(std::chrono::milliseconds timeout) {
  ProcessResult r;
  auto deadline = start_ + timeout;
  bool out_open = true, err_open = true;
  int status = 0;
  bool exited = false;
  char buf[65536];
  while (true) {
    if (!exited && ::waitpid(pid_, &status, WNOHANG) == pid_) exited = true;
    if (exited && !out_open && !err_open) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (!exited) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
      done_ = true;
      r.exit_code = -1;
      r.seconds = std::chrono::duration<double>(now - start_).count();
      return r;
    }
    pollfd fds[2] = {{out_open ? out_fd_ : -1, POLLIN, 0}, {err_open ? err_fd_ : -1, POLLIN, 0}};
    ::poll(fds, 2, 20);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(i == 0 ? out_fd_ : err_fd_, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      } else {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  done_ = true;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::vector<std::string>& env_overrides) {
  Subprocess p(argv, env_overrides);
  return p.Wait(timeout);
}

bool ProcessAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  return line[paren + 2] != 'Z';
}

bool AllDead(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    if (ProcessAlive(p)) return false;
  }
  return true;
}

std::vector<pid_t> ReadPidFiles(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".pid") continue;
    pid_t pid = 0;
    std::ifstream(entry.path()) >> pid;
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

namespace {

std::string DefaultTempParent() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp ? tmp : "/tmp";
}

}  // namespace

TempDir::TempDir() : TempDir(DefaultTempParent()) {}

TempDir::TempDir(const std::string& parent) {
  std::string pattern = parent + "/dslaunch-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) std::abort();
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

}  // namespace dslaunch::testing
