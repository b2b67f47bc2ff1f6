// The start tree through SshAgentStarter against the namespaced cluster's sshds (docs/ssh.md, "The
// start tree"): chains of start relays (fanout 1, threshold 2) with a stand-in agent script and
// the real `dslaunch-agent --start_relay`: output, secret, endpoint and exit of every node, a kill
// two relays down, a head whose relay fails. Whole jobs through trees are in
// tests/launcher/start_tree_cluster_test.cc.
#include <doctest/doctest.h>

#include <csignal>

#include "launcher/start/ssh/agent_starter.h"
#include "tests/launcher/start/ssh/ssh_test_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

using namespace ssh_test;

// A stand-in agent for start trees: as WriteFakeAgent's (without the old version on node 2), and
// the real dslaunch-agent when asked to be a start relay, except on node 0 when the file
// break-relay-0 exists next to it.
std::string WriteTreeAgent(const TempDir& dir) {
  std::string path = dir.path() + "/tree-agent";
  WriteFile(path,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then echo 'dslaunch-agent 0.1.0'; exit 0; fi\n"
            "if [ \"$1\" = --start_relay ]; then\n"
            "  case \"$SSH_CONNECTION\" in *' " + Addr(0) + " '*) [ -e \"$(dirname \"$0\")/break-relay-0\" ] &&\n"
            "    { echo 'relay broken on purpose' >&2; exit 5; } ;; esac\n"
            "  exec '" DSLAUNCH_BIN_DIR "/dslaunch-agent' --start_relay\n"
            "fi\n"
            "read -r secret\n"
            "echo \"args:$*\"\n"
            "echo \"got:$secret\"\n"
            "case \"$*\" in *'--node_rank 2'*) echo sleeping; exec sleep 60 ;; esac\n"
            "exit 7\n",
            0755);
  return path;
}

TEST_CASE("Through a chain of start relays each node's output and end reach its callbacks, and Kill reaches the last") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshOptions options = c->Options();
  options.fanout = 1;  // past the threshold: node 0 starts node 1, which starts node 2
  options.tree_threshold = 2;
  SshAgentStarter starter(options);
  PreflightChecks checks{WriteTreeAgent(dir), "dslaunch-agent 0.1.0", dir.path()};
  std::vector<NodePlan> nodes = {Node(0, Addr(0)), Node(1, Addr(1)), Node(2, Addr(2))};
  Status preflight = starter.Preflight(nodes, checks);
  REQUIRE_MESSAGE(preflight.ok(), preflight.ToString());
  Recorder recorders[3];
  std::vector<std::unique_ptr<AgentHandle>> handles;
  for (int i = 0; i < 3; ++i) {
    AgentCommand command{checks.agent_path, "ignored", 4242, "job-1", i, std::nullopt};
    auto handle = starter.Start(nodes[i], command, "s3cret", recorders[i].Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    handles.push_back(std::move(handle).value());
  }
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    Recorder& r = recorders[i];
    REQUIRE(r.WaitExit(kEventTimeout));
    std::lock_guard lock(r.mu);
    // Every node is told the launcher's address as the head reached it, not its parent's.
    const std::string args = "args:--endpoint 172.30.77.1:4242 --job_id job-1 --node_rank " + std::to_string(i);
    CHECK(std::find(r.lines.begin(), r.lines.end(), args) != r.lines.end());
    CHECK(std::find(r.lines.begin(), r.lines.end(), "got:s3cret") != r.lines.end());
    CHECK(*r.exit == ExitStatus::Exited(7));
  }
  // Nodes 0 and 1 are heads: their own agents are their relays' children.
  CHECK(recorders[0].detail == "agent process ended");
  CHECK(recorders[1].detail == "agent process ended");
  REQUIRE(recorders[2].WaitLine("sleeping", kEventTimeout));
  handles[2]->Kill();  // two relays down
  REQUIRE(recorders[2].WaitExit(kEventTimeout));
  CHECK(*recorders[2].exit == ExitStatus::Signaled(SIGKILL));
  // Node 2 was started over SSH by the relay on node 1, which killed it as the launcher would.
  CHECK(Contains(recorders[2].detail, "killed (KILL signal sent over ssh to " + Addr(2) + ")"));
  handles.clear();
  for (Recorder& r : recorders) CHECK(r.exits == 1);
}

TEST_CASE("A head whose start relay fails is reported, and the next node of its group takes its place") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshOptions options = c->Options();
  options.fanout = 1;
  options.tree_threshold = 2;
  SshAgentStarter starter(options);
  PreflightChecks checks{WriteTreeAgent(dir), "dslaunch-agent 0.1.0", dir.path()};
  WriteFile(dir.path() + "/break-relay-0", "");
  std::vector<NodePlan> nodes = {Node(0, Addr(0)), Node(1, Addr(1)), Node(2, Addr(2))};
  auto failures = starter.PreflightEach(nodes, checks);
  REQUIRE_MESSAGE(failures.ok(), failures.status().ToString());
  REQUIRE(failures->size() == 1);
  CHECK((*failures)[0].node_rank == 0);
  CHECK((*failures)[0].reason ==
        "the start relay ended before it had checked its subtree (exit code 5, ssh channel to " + Addr(0) +
            " closed: relay broken on purpose)");
  // Node 1 became the head of node 2; both start.
  Recorder recorders[2];
  std::vector<std::unique_ptr<AgentHandle>> handles;
  for (int i = 1; i <= 2; ++i) {
    AgentCommand command{checks.agent_path, "", 4242, "job-2", i, std::nullopt};
    auto handle = starter.Start(nodes[i], command, "s", recorders[i - 1].Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    handles.push_back(std::move(handle).value());
  }
  REQUIRE(recorders[0].WaitExit(kEventTimeout));
  CHECK(*recorders[0].exit == ExitStatus::Exited(7));
  CHECK(recorders[0].detail == "agent process ended");  // node 1 is a head now
  REQUIRE(recorders[1].WaitLine("sleeping", kEventTimeout));
  handles[1]->Kill();
  REQUIRE(recorders[1].WaitExit(kEventTimeout));
}

}  // namespace
}  // namespace dslaunch::launcher
