#include "launcher/machine/init_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dslaunch::launcher {

InitReap OnReaped(pid_t child, pid_t pid, const ExitStatus& status) {
  if (pid != child) return {};
  return {true, ShellExitCode(status)};
}

namespace {

sigset_t InitSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  return set;
}

// PID 1's loop: never returns.
[[noreturn]] void RunInit(pid_t child, const sigset_t& waited) {
  for (;;) {
    siginfo_t info{};
    const int sig = ::sigwaitinfo(&waited, &info);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      ::kill(child, sig);
      continue;
    }
    // One SIGCHLD may stand for several ended processes: reap until none is left.
    for (;;) {
      int wait_status = 0;
      const pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
      if (pid <= 0) break;
      const InitReap r = OnReaped(child, pid, ExitStatus::FromWaitStatus(wait_status));
      // The container ends with its launcher: the kernel kills whatever is left in the PID
      // namespace when its init exits (the launcher has already swept its own descendants).
      if (r.launcher_ended) ::_exit(r.exit_code);
    }
  }
}

}  // namespace

Status SplitOffInitIfPid1() {
  if (::getpid() != 1) return Status::Ok();
  const sigset_t waited = InitSignals();
  sigset_t previous;
  // Blocked before the fork, so that no signal meant for the launcher is lost in between.
  ::sigprocmask(SIG_BLOCK, &waited, &previous);
  const pid_t child = ::fork();
  if (child < 0) {
    const int err = errno;
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return InternalError(std::string("running as PID 1: cannot fork the launcher: ") + std::strerror(err));
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return Status::Ok();
  }
  RunInit(child, waited);
}

}  // namespace dslaunch::launcher
