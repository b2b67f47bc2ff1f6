#include "benchmarks/sim_scale/launcher_process.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "common/auth/secret.h"

namespace dslaunch::sim {
namespace {

// Lines of the launcher's output kept for an error message.
constexpr size_t kTailLines = 30;
// What node 0 prints once its endpoint listens (launcher/job/join_phase.cc, JoinPhase::Open).
constexpr char kWaitingLine[] = "s for the other nodes";

}  // namespace

Result<std::unique_ptr<LauncherProcess>> LauncherProcess::Start(SimLoop& loop, const LauncherSpec& s) {
  const std::string secret_file = s.work_dir + "/secret";
  ::unlink(secret_file.c_str());
  DSLAUNCH_RETURN_IF_ERROR(WriteSecretFile(secret_file, s.secret));
  std::vector<std::string> args = {s.launcher,
                                   "--nnodes", std::to_string(s.nodes),
                                   "--node_rank", "0",
                                   "--rdzv_endpoint", "127.0.0.1:" + std::to_string(s.port),
                                   "--nproc_per_node", std::to_string(s.ranks_per_node),
                                   "--rdzv_id", s.job_id,
                                   "--secret_file", secret_file,
                                   "--log_dir", s.work_dir + "/logs",
                                   "--no_python", s.worker};
  if (!s.store_proxy) {
    // Launcher options go before the program; --alltoall below is the worker's.
    args.insert(args.end() - 2, {"--store_proxy", "off"});
  }
  if (s.alltoall) args.push_back("--alltoall");
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::setpgid(0, 0);  // its own process group: a terminal's ^C reaches the simulator only
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  auto p = std::unique_ptr<LauncherProcess>(new LauncherProcess(loop, pid, out[0], s.work_dir + "/launcher.log"));
  loop.Watch(out[0], EPOLLIN, p.get());
  return p;
}

LauncherProcess::LauncherProcess(SimLoop& loop, pid_t pid, int out_fd, std::string log_path)
    : loop_(loop), pid_(pid), out_fd_(out_fd), log_(log_path) {
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pid_fd_ >= 0) {
    exit_watch_.loop = &loop_;
    exit_watch_.fd = pid_fd_;
    loop_.Watch(pid_fd_, EPOLLIN, &exit_watch_);
  }
}

LauncherProcess::~LauncherProcess() {
  if (pid_fd_ >= 0) {
    loop_.Forget(pid_fd_);  // harmless if it fired already
    ::close(pid_fd_);
  }
  if (out_fd_ >= 0) {
    loop_.Forget(out_fd_);
    ::close(out_fd_);
  }
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool LauncherProcess::exited() {
  if (reaped_) return true;
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
}

int LauncherProcess::Reap() {
  if (reaped_) return code_;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  reaped_ = true;
  OnEvents(EPOLLIN);  // what it wrote last
  code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return code_;
}

std::string LauncherProcess::tail() const {
  std::string all;
  for (const auto& l : tail_) all += "  " + l + "\n";
  return all;
}

void LauncherProcess::OnEvents(uint32_t) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        loop_.Forget(out_fd_);
        ::close(out_fd_);
        out_fd_ = -1;
      }
      return;
    }
    log_.write(buf, n);
    log_.flush();
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = partial_.substr(start, nl - start);
      ++lines_;
      if (line.find(kWaitingLine) != std::string::npos) waiting_ = true;
      tail_.push_back(std::move(line));
      if (tail_.size() > kTailLines) tail_.pop_front();
    }
    partial_.erase(0, start);
  }
}

}  // namespace dslaunch::sim
