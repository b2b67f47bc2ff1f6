#include "launcher/start/no_ssh.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace dslaunch::launcher {
namespace {

// An agent some other node started itself: nothing to kill from here, and its end is learned
// from the control connection.
class ExternalAgentHandle : public AgentHandle {
 public:
  void Kill() override {}
};

}  // namespace

Status SelfStartedAgentStarter::Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) {
  for (const auto& node : nodes) {
    if (node.node_rank == own_node_rank_) return local_.Preflight({node}, checks);
  }
  return Status::Ok();
}

Result<std::unique_ptr<AgentHandle>> SelfStartedAgentStarter::Start(const NodePlan& node, const AgentCommand& command,
                                                                    std::string_view secret, AgentCallbacks callbacks) {
  if (node.node_rank == own_node_rank_) return local_.Start(node, command, secret, std::move(callbacks));
  return std::unique_ptr<AgentHandle>(std::make_unique<ExternalAgentHandle>());
}

Status ExecNodeAgent(const AgentCommand& command, std::string_view secret) {
  int fds[2];
  if (::pipe(fds) != 0) return ErrnoError("pipe", errno);
  // The secret fits in the pipe's buffer, so it can be written before the agent exists.
  std::string line(secret);
  line += '\n';
  bool written = ::write(fds[1], line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fds[1]);
  if (!written || ::dup2(fds[0], STDIN_FILENO) < 0) {
    int e = errno;
    ::close(fds[0]);
    return ErrnoError("pass the secret to the agent", e);
  }
  ::close(fds[0]);
  std::vector<std::string> args = AgentArgv(command, command.endpoint_host);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  return ErrnoError("cannot execute the agent '" + command.agent_path + "'", errno);
}

}  // namespace dslaunch::launcher
