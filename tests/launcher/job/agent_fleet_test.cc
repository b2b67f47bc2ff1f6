// The agent fleet (launcher/job/agent_fleet.h) with fakes of the lifecycle (FleetEvents), the
// starter, the loop (its clocks and timers moved by hand) and the agents' connections: who is
// admitted and what a refused agent is told, heartbeats and the loss of a silent agent, a process
// that ends before it registers, re-probes, and the end of the job.
#include "launcher/job/agent_fleet.h"

#include <doctest/doctest.h>

#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/elastic/elastic_policy.h"
#include "launcher/job/snapshot_peers.h"
#include "tests/fakes/fake_endpoint_connection.h"
#include "tests/fakes/fake_job_loop.h"
#include "tests/support/console_pipe.h"

namespace dslaunch::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct FakeHandle final : AgentHandle {
  explicit FakeHandle(int& kills) : kills(kills) {}
  void Kill() override { ++kills; }
  int& kills;
};

// Starts nothing: keeps each start's callbacks, counts kills; pre-flight answers `preflight`.
struct FakeStarter final : AgentStarter {
  Status Preflight(const std::vector<NodePlan>&, const PreflightChecks&) override { return preflight; }
  Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command, std::string_view,
                                             AgentCallbacks callbacks) override {
    commands.push_back(command);
    started.push_back(std::move(callbacks));
    hosts.push_back(node.host);
    return std::unique_ptr<AgentHandle>(std::make_unique<FakeHandle>(kills));
  }
  Status preflight = Status::Ok();
  std::vector<AgentCommand> commands;
  std::vector<AgentCallbacks> started;
  std::vector<std::string> hosts;
  int kills = 0;
};

// The lifecycle: admits every registering agent it is asked about (with `stopping`), records the rest.
struct FakeLifecycle final : FleetEvents {
  Status OnRegister(AgentLink& link, const control::Register& reg) override {
    if (auto node_rank = fleet->Admit(link, reg.node_rank, stopping)) admitted.push_back(*node_rank);
    return Status::Ok();
  }
  void OnAgentMessage(int candidate, const control::Message&) override { messages.push_back(candidate); }
  void OnAgentClosed(int node_rank, const Status&) override { closed.push_back(node_rank); }
  void OnJoinedClosed(int) override {}
  void OnMemberLost(int node_rank, const std::string& why, std::optional<ExitStatus> status) override {
    lost.emplace_back(node_rank, why);
    lost_status = status;
  }
  bool AgentLeavesWhenDone(int) const override { return false; }
  bool NodeFailed(int) const override { return true; }
  void OnNodeUnreachable(int candidate) override { unreachable.push_back(candidate); }
  void OnNodeAnswered(int candidate) override { answered.push_back(candidate); }

  AgentFleet* fleet = nullptr;
  bool stopping = false;
  std::vector<int> admitted, messages, closed, unreachable, answered;
  std::vector<std::pair<int, std::string>> lost;
  std::optional<ExitStatus> lost_status;
};

std::vector<NodePlan> Nodes(int n) {
  std::vector<NodePlan> nodes(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    nodes[i].node_rank = i;
    nodes[i].host = "node" + std::to_string(i);
    nodes[i].slots = {0};
  }
  return nodes;
}

AgentFleet::Options FleetOptions() {
  AgentFleet::Options o;
  o.agent_path = "/opt/dslaunch-agent";
  o.advertise_host = "10.0.0.1";
  o.job_id = "job1";
  o.secret = "s3cret";
  o.heartbeat_timeout = seconds(3);
  o.heartbeat_interval = seconds(1);
  return o;
}

// An agent's connection, as the endpoint hands it to the fleet.
struct Agent {
  Agent(AgentFleet& fleet) : conn(std::make_shared<FakeEndpointConnection>()), link(fleet.Accept(conn, nullptr)) {}
  Status Register(int candidate, const std::string& job_id = "job1", const std::string& snapshot_address = "") {
    control::Register reg;
    reg.snapshot_address = snapshot_address;
    reg.job_id = job_id;
    reg.node_rank = candidate;
    reg.version = DSLAUNCH_VERSION;
    reg.host = "node" + std::to_string(candidate);
    reg.pid = 4000 + candidate;
    return link->OnFrame(control::Encode(reg));
  }
  const std::string& StopReason() const { return std::get<control::Stop>(conn->sent.at(0)).reason; }
  std::shared_ptr<FakeEndpointConnection> conn;
  std::unique_ptr<SessionHandler> link;
};

struct Fixture {
  explicit Fixture(int nodes, std::function<std::unique_ptr<AgentStarter>()> probe = nullptr)
      : console(-1, pipe.fds[1]), fleet(FleetOptions(), starter, console, loop, lifecycle) {
    lifecycle.fleet = &fleet;
    fleet.SetEndpointPort(29400);
    fleet.SetUp(Nodes(nodes), std::move(probe));
  }
  ConsolePipe pipe;
  Console console;
  FakeJobLoop loop;
  FakeStarter starter;
  FakeLifecycle lifecycle;
  AgentFleet fleet;

  // Generation 0 on node 0 alone: its agent is started, registers on `agent`, and heartbeats run.
  void StartSeated(Agent& agent) {
    fleet.SetMembers(0, {0});
    fleet.StartAgentIfNone(0);
    REQUIRE(agent.Register(0).ok());
    REQUIRE(fleet.seated(0));
    fleet.StartHeartbeats();
  }
};

TEST_CASE("AgentFleet admits an agent only where it started one, and tells every other why") {
  Fixture f(2);
  f.fleet.SetMembers(0, {0, 1});
  f.fleet.StartAgentIfNone(0);
  f.fleet.StartAgentIfNone(0);  // one start only while it is expected
  REQUIRE(f.starter.commands.size() == 1);
  CHECK(f.starter.hosts[0] == "node0");
  CHECK(f.starter.commands[0].endpoint_port == 29400);
  CHECK(f.starter.commands[0].node_rank == 0);

  Agent other_job(f.fleet);
  REQUIRE(other_job.Register(0, "job2").ok());
  CHECK(other_job.StopReason() == "agent of job 'job2' at job 'job1'");
  CHECK(other_job.conn->closed);
  Agent outside(f.fleet);
  REQUIRE(outside.Register(2).ok());
  CHECK(outside.StopReason() == "node 2 is outside 0..1");
  Agent unexpected(f.fleet);
  REQUIRE(unexpected.Register(1).ok());
  CHECK(unexpected.StopReason() == "node 1 has no agent expected in generation 0");

  f.lifecycle.stopping = true;
  Agent while_stopping(f.fleet);
  REQUIRE(while_stopping.Register(0).ok());
  CHECK(while_stopping.StopReason() == "the job is stopping");
  f.lifecycle.stopping = false;

  Agent agent(f.fleet);
  REQUIRE(agent.Register(0).ok());
  CHECK(f.lifecycle.admitted == std::vector<int>{0});
  CHECK(agent.conn->sent.empty());
  CHECK_FALSE(agent.conn->closed);
  CHECK(f.fleet.seated(0));
  Agent second(f.fleet);
  REQUIRE(second.Register(0).ok());
  CHECK(second.StopReason() == "node 0 already has an agent");

  // Its messages reach the lifecycle; its close frees the place.
  REQUIRE(agent.link->OnFrame(control::Encode(control::Heartbeat{0, 1})).ok());
  CHECK(f.lifecycle.messages == std::vector<int>{0});
  agent.link->OnClose(UnavailableError("peer closed"));
  CHECK(f.lifecycle.closed == std::vector<int>{0});
  CHECK_FALSE(f.fleet.seated(0));
}

// The SNAPSHOT_PEERS each agent was sent, in order.
std::vector<std::vector<std::string>> PeersSent(const Agent& agent) {
  std::vector<std::vector<std::string>> sent;
  for (const control::Message& m : agent.conn->sent) {
    if (const auto* peers = std::get_if<control::SnapshotPeers>(&m)) sent.push_back(peers->peers);
  }
  return sent;
}

TEST_CASE("AgentFleet tells every member its peers for snapshot copies once the generation's agents are all in") {
  Fixture f(3);
  f.fleet.SetMembers(0, {0, 1, 2});
  for (int n = 0; n < 3; ++n) f.fleet.StartAgentIfNone(n);
  Agent a0(f.fleet), a1(f.fleet), a2(f.fleet);
  REQUIRE(a0.Register(0, "job1", "10.0.0.10:5000").ok());
  f.fleet.SendAssignment(0, control::Assignment{});
  REQUIRE(a1.Register(1, "job1", "10.0.0.11:5001").ok());
  f.fleet.SendAssignment(1, control::Assignment{});
  CHECK(PeersSent(a0).empty());  // node 2 has no agent yet
  REQUIRE(a2.Register(2, "job1", "").ok());  // it could not listen for copies
  f.fleet.SendAssignment(2, control::Assignment{});
  // The next nodes in node-rank order, wrapping around, never the node itself, skipping node 2.
  CHECK(PeersSent(a0) == std::vector<std::vector<std::string>>{{"10.0.0.11:5001"}});
  CHECK(PeersSent(a1) == std::vector<std::vector<std::string>>{{"10.0.0.10:5000"}});
  CHECK(PeersSent(a2) == std::vector<std::vector<std::string>>{{"10.0.0.10:5000", "10.0.0.11:5001"}});
  // Sent once per generation, after the ASSIGNMENT.
  f.fleet.SendAssignment(2, control::Assignment{});
  CHECK(PeersSent(a2).size() == 1);
  CHECK(std::holds_alternative<control::Assignment>(a2.conn->sent.front()));

  // Generation 1 on nodes 1 and 0 (node 2 released): the ring of the new order.
  f.fleet.SetMembers(1, {1, 0});
  f.fleet.SendAssignment(1, control::Assignment{});
  f.fleet.SendAssignment(0, control::Assignment{});
  CHECK(PeersSent(a0).back() == std::vector<std::string>{"10.0.0.11:5001"});
  CHECK(PeersSent(a1).back() == std::vector<std::string>{"10.0.0.10:5000"});
  CHECK(PeersSent(a0).size() == 2);
}

TEST_CASE("SnapshotPeersOf: the next nodes of the ring, at most the limit, never the node itself") {
  const std::vector<std::string> ring = {"a:1", "b:1", "c:1", "d:1", "e:1"};
  CHECK(SnapshotPeersOf(ring, 0, 1) == std::vector<std::string>{"b:1"});
  CHECK(SnapshotPeersOf(ring, 3, 3) == std::vector<std::string>{"e:1", "a:1", "b:1"});
  CHECK(SnapshotPeersOf(ring, 4, 9) == std::vector<std::string>{"a:1", "b:1", "c:1", "d:1"});
  CHECK(SnapshotPeersOf({"a:1"}, 0, 3).empty());
  CHECK(SnapshotPeersOf({"a:1", "", ""}, 1, 3) == std::vector<std::string>{"a:1"});
}

TEST_CASE("AgentFleet sends heartbeats every interval and loses an agent silent past the timeout") {
  Fixture f(1);
  Agent agent(f.fleet);
  f.StartSeated(agent);
  f.loop.Advance(seconds(1));
  REQUIRE(agent.conn->sent.size() == 1);
  CHECK(std::get<control::Heartbeat>(agent.conn->sent[0]).sequence == 1);
  f.loop.Advance(seconds(2));  // 3 s of silence: not yet over the timeout
  CHECK(agent.conn->sent.size() == 3);
  CHECK(f.lifecycle.lost.empty());
  f.loop.Advance(seconds(1));
  REQUIRE(f.lifecycle.lost.size() == 1);
  CHECK(f.lifecycle.lost[0] == std::pair<int, std::string>{0, "no heartbeat for " + FormatSeconds(milliseconds(4000))});
  CHECK(agent.conn->closed);
  CHECK_FALSE(f.fleet.seated(0));
  CHECK(f.loop.armed() == 1);  // the checks go on
}

TEST_CASE("AgentFleet gives every agent a fresh timeout after the launcher itself was suspended") {
  Fixture f(1);
  Agent agent(f.fleet);
  f.StartSeated(agent);
  f.loop.now += seconds(5);  // the check due after 1 s runs 5 s late
  f.loop.Advance(milliseconds(0));
  CHECK(f.pipe.Drain() == "dslaunch: the launcher was suspended for " + FormatSeconds(milliseconds(5000)) + "\n");
  CHECK(f.lifecycle.lost.empty());
  REQUIRE(agent.conn->sent.size() == 1);
  CHECK(std::holds_alternative<control::Heartbeat>(agent.conn->sent[0]));
}

TEST_CASE("AgentFleet reports an agent process that ends before it registers as the member's loss") {
  Fixture f(2);
  f.fleet.SetMembers(3, {1, 0});  // candidate 0 is node rank 1
  f.fleet.StartAgentIfNone(0);
  REQUIRE(f.starter.started.size() == 1);
  f.starter.started[0].on_output("ssh: connect to host node0 port 22: Connection refused");
  f.starter.started[0].on_exit(ExitStatus::Exited(255), "ssh");
  CHECK(f.loop.RunPosted() == 2);
  CHECK(f.pipe.Drain() == "ssh: connect to host node0 port 22: Connection refused\n");
  REQUIRE(f.lifecycle.lost.size() == 1);
  CHECK(f.lifecycle.lost[0] ==
        std::pair<int, std::string>{
            1, "agent exited with " + DescribeExitStatus(ExitStatus::Exited(255)) + " before registering (ssh)"});
  CHECK(f.lifecycle.lost_status == ExitStatus::Exited(255));
}

TEST_CASE("AgentFleet re-probes a failed node after the backoff, longer after each probe without an answer") {
  auto preflight = std::make_shared<Status>(FailedPreconditionError("node1: unreachable"));
  Fixture f(2, [preflight] {
    auto s = std::make_unique<FakeStarter>();
    s->preflight = *preflight;
    return std::unique_ptr<AgentStarter>(std::move(s));
  });
  f.fleet.Probe(1);
  f.fleet.Probe(1);  // one probe at a time
  CHECK(f.loop.armed() == 1);
  CHECK(f.loop.NextDeadline() == f.loop.now + ReprobeDelay(0));
  f.loop.Advance(ReprobeDelay(0));
  REQUIRE(f.loop.WaitPosted(seconds(30)));
  f.loop.RunPosted();
  CHECK(f.lifecycle.unreachable == std::vector<int>{1});
  CHECK(f.loop.NextDeadline() == f.loop.now + ReprobeDelay(1));  // probed again, later

  *preflight = Status::Ok();
  f.loop.Advance(ReprobeDelay(1));
  REQUIRE(f.loop.WaitPosted(seconds(30)));
  f.loop.RunPosted();
  CHECK(f.lifecycle.answered == std::vector<int>{1});
  CHECK(f.loop.armed() == 0);
}

TEST_CASE("AgentFleet releases every seated agent at the end, kills the ones that do not exit, then stops") {
  Fixture f(2);
  f.fleet.SetMembers(0, {0, 1});
  f.fleet.StartAgentIfNone(0);
  f.fleet.StartAgentIfNone(1);
  Agent agent(f.fleet);
  REQUIRE(agent.Register(0).ok());
  f.fleet.StartHeartbeats();
  f.fleet.ReleaseAll(7);
  REQUIRE(agent.conn->sent.size() == 1);
  const auto& release = std::get<control::Release>(agent.conn->sent[0]);
  CHECK(release.generation == 0);
  CHECK(release.exit_code == 7);
  CHECK(agent.conn->closed);

  f.starter.started[1].on_exit(ExitStatus::Exited(0), "");
  f.loop.RunPosted();
  f.fleet.AwaitExits();  // node 0's agent has not exited
  CHECK_FALSE(f.loop.stopped);
  f.loop.Advance(kAgentExitWait);
  CHECK(f.starter.kills == 1);
  CHECK_FALSE(f.loop.stopped);
  f.loop.Advance(kAgentKillWait);
  CHECK(f.loop.stopped);
  CHECK(agent.conn->sent.size() == 1);  // no heartbeat after the release
}

TEST_CASE("AgentFleet stops the loop when the last agent exits after the release") {
  Fixture f(1);
  f.fleet.SetMembers(0, {0});
  f.fleet.StartAgentIfNone(0);
  f.fleet.ReleaseAll(-1);
  f.fleet.AwaitExits();
  CHECK_FALSE(f.loop.stopped);
  f.starter.started[0].on_exit(ExitStatus::Exited(0), "");
  f.loop.RunPosted();
  CHECK(f.loop.stopped);
  CHECK(f.lifecycle.lost.empty());
}

}  // namespace
}  // namespace dslaunch::launcher
