#include "agent/workers/worker_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/spawn.h"

namespace dslaunch::agent {

Result<SpawnedProcess> SpawnInOwnProcessGroup(const ProcessLaunch& launch) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd err_r(err[0]), err_w(err[1]);

  SpawnOptions options;
  options.argv = launch.argv;
  options.env = launch.env;
  options.working_dir = launch.working_dir;
  options.cpu_affinity = launch.cpus;
  options.memory_node = launch.memory_node;
  options.inherited_fds = launch.inherited_fds;
  options.new_process_group = true;
  options.kill_with_parent = true;
  options.stdout_fd = out_w.get();
  options.stderr_fd = err_w.get();
  options.exec_error_prefix = "dslaunch-agent: ";
  DSLAUNCH_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(options));

  for (int fd : {out_r.get(), err_r.get()}) {
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  SpawnedProcess p;
  p.pid = pid;
  p.stdout_fd = std::move(out_r);
  p.stderr_fd = std::move(err_r);
  return p;
}

Status SignalProcessGroup(pid_t pgid, int signal) {
  if (pgid <= 1) return InternalError("refusing to signal process group " + std::to_string(pgid));
  if (::kill(-pgid, signal) != 0 && errno != ESRCH) {
    return ErrnoError("kill(-" + std::to_string(pgid) + ")", errno);
  }
  return Status::Ok();
}

bool ProcessGroupExists(pid_t pgid) {
  return pgid > 1 && (::kill(-pgid, 0) == 0 || errno == EPERM);
}

}  // namespace dslaunch::agent
