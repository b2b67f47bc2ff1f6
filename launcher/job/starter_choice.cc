#include "launcher/job/starter_choice.h"

#include <algorithm>
#include <string>

#include "launcher/start/no_ssh.h"
#include "launcher/start/srun/agent_starter.h"
#include "launcher/start/ssh/agent_starter.h"

namespace dslaunch::launcher {

Result<AgentStart> ChooseAgentStart(const AgentStartFacts& facts, const Resources& selection) {
  if (facts.no_ssh) return AgentStart::kNoSsh;
  if (facts.requested == LauncherKind::kLocal && !facts.one_local_node && !facts.launcher.nodes_from_slurm) {
    return InvalidArgumentError("--launcher local starts agents on this machine only, but the selection has " +
                                std::to_string(selection.size()) + " host(s) starting with '" +
                                selection.front().host + "'; use --launcher ssh or slurm");
  }
  switch (facts.launcher.kind) {
    case LauncherKind::kSlurm:
      return AgentStart::kSrun;
    case LauncherKind::kLocal:
      return AgentStart::kLocal;
    case LauncherKind::kSsh:
      return !facts.requested && facts.one_local_node ? AgentStart::kLocal : AgentStart::kSsh;
  }
  return AgentStart::kSsh;
}

int64_t StartDescriptors(AgentStart start, int64_t nodes, const SshOptions& ssh) {
  switch (start) {
    case AgentStart::kLocal:
      return nodes * kLocalAgentDescriptors;
    case AgentStart::kNoSsh:
    case AgentStart::kSrun:
      return 0;
    case AgentStart::kSsh:
      return nodes > ssh.tree_threshold ? std::min<int64_t>(nodes, ssh.fanout) : nodes;
  }
  return 0;
}

Starters MakeStarters(AgentStart start, std::optional<uint64_t> agent_open_files, const SlurmAllocation* allocation,
                      const SshOptions& ssh) {
  Starters s;
  switch (start) {
    case AgentStart::kLocal:
      s.starter = std::make_unique<LocalAgentStarter>(agent_open_files);
      s.probe = [agent_open_files] { return std::make_unique<LocalAgentStarter>(agent_open_files); };
      break;
    case AgentStart::kNoSsh:
      s.starter = std::make_unique<SelfStartedAgentStarter>(0, agent_open_files);
      break;
    case AgentStart::kSrun: {
      SrunOptions so;
      for (size_t i = 0; i < allocation->cpus_per_node.size(); ++i) {
        so.cpus_per_node[allocation->nodes[i]] = allocation->cpus_per_node[i];
      }
      s.starter = std::make_unique<SrunAgentStarter>(so);
      s.probe = [so] { return std::make_unique<SrunAgentStarter>(so); };
      break;
    }
    case AgentStart::kSsh:
      s.starter = std::make_unique<SshAgentStarter>(ssh);
      s.probe = [ssh] { return std::make_unique<SshAgentStarter>(ssh); };
      break;
  }
  return s;
}

}  // namespace dslaunch::launcher
