#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "common/spawn.h"
#include "common/unique_fd.h"
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

namespace {

// A local agent process. A thread waits for it and reports its exit; the handle joins that thread.
class LocalAgentHandle : public AgentHandle {
 public:
  LocalAgentHandle(pid_t pid, AgentCallbacks callbacks) : pid_(pid) {
    waiter_ = std::thread([pid, callbacks = std::move(callbacks)] {
      int st = 0;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      if (callbacks.on_exit) callbacks.on_exit(ExitStatus::FromWaitStatus(st), "agent process ended");
    });
  }
  // The launcher destroys handles only once every agent has exited or been killed (Kill), so
  // the join returns promptly.
  ~LocalAgentHandle() override {
    if (waiter_.joinable()) waiter_.join();
  }
  void Kill() override { ::kill(pid_, SIGKILL); }

 private:
  pid_t pid_;
  std::thread waiter_;
};

}  // namespace

Status LocalAgentStarter::Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) {
  std::string problems;
  if (::access(checks.agent_path.c_str(), X_OK) != 0) {
    problems += "  agent '" + checks.agent_path + "' is not executable: " + std::strerror(errno) + "\n";
  }
  struct stat st {};
  if (!checks.working_directory.empty() &&
      (::stat(checks.working_directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    problems += "  working directory '" + checks.working_directory + "' does not exist\n";
  }
  if (problems.empty()) return Status::Ok();
  return FailedPreconditionError("pre-flight failed on this machine; nothing was started:\n" + problems);
}

Result<std::unique_ptr<AgentHandle>> LocalAgentStarter::Start(const NodePlan& node, const AgentCommand& command,
                                                              std::string_view secret, AgentCallbacks callbacks) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  SpawnOptions options;
  options.argv = AgentArgv(command, command.endpoint_host);
  options.stdin_fd = read_end.get();
  options.exec_error_prefix = "dslaunch: ";
  options.soft_open_files_limit = agent_open_files_limit_;
  DSLAUNCH_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(options));
  read_end.Reset();
  // The secret is small (well under PIPE_BUF), so this write completes at once. If the agent
  // died already (EPIPE; SIGPIPE is ignored by the launcher), its exit is reported by the waiter,
  // which names the cause better than the failed write would.
  std::string line(secret);
  line += '\n';
  (void)!::write(write_end.get(), line.data(), line.size());
  return std::unique_ptr<AgentHandle>(std::make_unique<LocalAgentHandle>(pid, std::move(callbacks)));
}

}  // namespace dslaunch::launcher
