// The agent's command line, shared by every AgentStarter (launcher/start/agent_starter.h). Pure.
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

std::string JoinHostPort(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::vector<std::string> AgentArgv(const AgentCommand& command, const std::string& endpoint_host) {
  std::vector<std::string> argv{command.agent_path, "--endpoint", JoinHostPort(endpoint_host, command.endpoint_port),
                                "--job_id",          command.job_id, "--node_rank", std::to_string(command.node_rank)};
  if (command.join) {
    argv.insert(argv.end(), {"--slots", std::to_string(command.join->slots), "--join_timeout",
                             std::to_string(command.join->timeout.count())});
  }
  if (command.exit_codes != ExitCodeScheme::kClasses) {
    argv.insert(argv.end(), {"--exit_codes", std::string(ExitCodeSchemeName(command.exit_codes))});
  }
  return argv;
}

Result<std::vector<PreflightFailure>> AgentStarter::PreflightEach(const std::vector<NodePlan>& nodes,
                                                                  const PreflightChecks& checks) {
  std::vector<PreflightFailure> failures;
  for (const NodePlan& node : nodes) {
    Status s = Preflight({node}, checks);
    if (!s.ok()) failures.push_back({node.node_rank, node.host, s.message()});
  }
  return failures;
}

}  // namespace dslaunch::launcher
