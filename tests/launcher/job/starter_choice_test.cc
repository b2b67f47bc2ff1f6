#include "launcher/job/starter_choice.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

Resources Hosts(std::initializer_list<const char*> names) {
  Resources r;
  for (const char* n : names) r.push_back(NodeResources{"", n, {0}});
  return r;
}

AgentStartFacts Facts(LauncherKind chosen, bool one_local_node, std::optional<LauncherKind> requested = std::nullopt) {
  AgentStartFacts f;
  f.launcher.kind = chosen;
  f.one_local_node = one_local_node;
  f.requested = requested;
  return f;
}

TEST_CASE("ChooseAgentStart: --no_ssh wins, srun under Slurm, local for this machine alone, else SSH") {
  AgentStartFacts no_ssh = Facts(LauncherKind::kSsh, false);
  no_ssh.no_ssh = true;
  CHECK(*ChooseAgentStart(no_ssh, Hosts({"a", "b"})) == AgentStart::kNoSsh);
  CHECK(*ChooseAgentStart(Facts(LauncherKind::kSlurm, false), Hosts({"a", "b"})) == AgentStart::kSrun);
  CHECK(*ChooseAgentStart(Facts(LauncherKind::kLocal, true), Hosts({"localhost"})) == AgentStart::kLocal);
  // A hostfile of this machine alone runs without SSH, unless --launcher ssh asks for SSH.
  CHECK(*ChooseAgentStart(Facts(LauncherKind::kSsh, true), Hosts({"here"})) == AgentStart::kLocal);
  CHECK(*ChooseAgentStart(Facts(LauncherKind::kSsh, true, LauncherKind::kSsh), Hosts({"here"})) == AgentStart::kSsh);
  CHECK(*ChooseAgentStart(Facts(LauncherKind::kSsh, false), Hosts({"a", "b"})) == AgentStart::kSsh);
}

TEST_CASE("ChooseAgentStart refuses --launcher local for hosts beyond this machine, naming them") {
  auto start = ChooseAgentStart(Facts(LauncherKind::kLocal, false, LauncherKind::kLocal), Hosts({"w-0", "w-1"}));
  REQUIRE_FALSE(start.ok());
  CHECK(start.status().message() ==
        "--launcher local starts agents on this machine only, but the selection has 2 host(s) starting with 'w-0'; "
        "use --launcher ssh or slurm");
  // Inside an allocation whose nodes are the job's, --launcher local is the allocation's business.
  AgentStartFacts slurm_nodes = Facts(LauncherKind::kLocal, false, LauncherKind::kLocal);
  slurm_nodes.launcher.nodes_from_slurm = true;
  CHECK(*ChooseAgentStart(slurm_nodes, Hosts({"w-0", "w-1"})) == AgentStart::kLocal);
}

TEST_CASE("StartDescriptors: local pipes, one SSH session per node or per tree head, none for srun and --no_ssh") {
  SshOptions ssh;
  ssh.tree_threshold = 64;
  ssh.fanout = 32;
  CHECK(StartDescriptors(AgentStart::kLocal, 3, ssh) == 3 * kLocalAgentDescriptors);
  CHECK(StartDescriptors(AgentStart::kSsh, 64, ssh) == 64);
  CHECK(StartDescriptors(AgentStart::kSsh, 65, ssh) == 32);
  CHECK(StartDescriptors(AgentStart::kSrun, 100, ssh) == 0);
  CHECK(StartDescriptors(AgentStart::kNoSsh, 100, ssh) == 0);
}

}  // namespace
}  // namespace dslaunch::launcher
