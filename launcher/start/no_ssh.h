// --no_ssh mode (DeepSpeed's and torchrun's style): the same dslaunch command is started on every
// node by something else (a scheduler, a Kubernetes Indexed Job, a shell loop), each with its own
// --node_rank. Node 0 hosts the launcher's endpoint on --master_addr:--rdzv_port and starts its own
// agent; every other node only runs its agent, which joins node 0's endpoint.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

// The starter of node 0 in --no_ssh mode: starts the agent of `own_node_rank` locally and treats
// every other node's agent as started elsewhere (it registers by itself; the registration timeout
// catches one that never comes). Pre-flight checks only this machine.
class SelfStartedAgentStarter : public AgentStarter {
 public:
  // `agent_open_files_limit`: as for LocalAgentStarter, for the agent this node starts itself.
  explicit SelfStartedAgentStarter(int own_node_rank,
                                   std::optional<uint64_t> agent_open_files_limit = std::nullopt)
      : own_node_rank_(own_node_rank), local_(agent_open_files_limit) {}
  Status Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) override;
  Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command,
                                             std::string_view secret, AgentCallbacks callbacks) override;

 private:
  int own_node_rank_;
  LocalAgentStarter local_;
};

// Nodes other than 0: replaces this process with the node's agent (exec), the secret on its
// stdin. Returns only on failure; the agent's exit code becomes this command's exit code.
Status ExecNodeAgent(const AgentCommand& command, std::string_view secret);

}  // namespace dslaunch::launcher
