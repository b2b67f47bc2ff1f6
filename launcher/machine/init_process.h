// dslaunch as PID 1: a container's entry point (docs/containers.md, "PID 1").
//
// PID 1 is special in two ways. The kernel gives it no default signal actions (a SIGTERM without a
// handler is ignored, so `docker stop` would wait for its SIGKILL), and every orphan in the
// container is re-parented to it, so something must reap them or they stay zombies. Like tini
// and dumb-init, dslaunch splits in two when it finds itself PID 1: the parent stays PID 1 and
// does nothing but forward signals and reap; the child goes on to be the launcher (or the node's
// agent), with ordinary signal semantics.
//
// Not thread-safe: call first thing in main(), before any thread exists.
#pragma once

#include <sys/types.h>

#include <array>
#include <csignal>

#include "common/exit_status.h"
#include "common/status.h"

namespace dslaunch::launcher {

// The signals PID 1 passes on to the launcher: every one a scheduler or a person sends to stop,
// interrupt or talk to a job (SIGKILL and SIGSTOP cannot be caught, and SIGCHLD is PID 1's own).
inline constexpr std::array<int, 8> kForwardedSignals = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT,
                                                         SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

// What PID 1 does after one wait result: the launcher child's end decides its exit code.
// Pure: `child` is the launcher's pid, `pid` and `status` what waitpid() reported.
struct InitReap {
  bool launcher_ended = false;
  int exit_code = 0;  // with launcher_ended: ShellExitCode of its status
};
InitReap OnReaped(pid_t child, pid_t pid, const ExitStatus& status);

// When the calling process is PID 1: forks; the child returns OK and continues as dslaunch; the
// parent never returns (it forwards kForwardedSignals to the child, reaps every process re-parented
// to it, and exits with the child's exit code, 128+N if the child died of signal N, once the child
// has ended). When not PID 1: returns OK and does nothing. An error only if the fork fails.
Status SplitOffInitIfPid1();

}  // namespace dslaunch::launcher
