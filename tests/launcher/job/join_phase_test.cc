// The join phase of node mode (launcher/job/join_phase.h) with fakes of the lifecycle (JoinEvents),
// the loop (its clock and timers moved by hand) and the agents' connections: what it prints, what
// it sends each joined node, and what it hands the lifecycle.
#include "launcher/job/join_phase.h"

#include <doctest/doctest.h>

#include <set>

#include "common/exit_codes.h"
#include "tests/fakes/fake_endpoint_connection.h"
#include "tests/fakes/fake_job_loop.h"
#include "tests/support/console_pipe.h"

namespace dslaunch::launcher {
namespace {

using std::chrono::seconds;

struct NoLinkEvents final : LinkEvents {
  Status OnRegister(AgentLink&, const control::Register&) override { return Status::Ok(); }
  void OnMessage(AgentLink&, const control::Message&) override {}
  void OnClosed(AgentLink&, const Status&) override {}
};

// An agent's link on a fake connection.
struct Agent {
  explicit Agent(LinkEvents& events)
      : conn(std::make_shared<FakeEndpointConnection>()), link(events, conn, nullptr, "job1") {}
  std::shared_ptr<FakeEndpointConnection> conn;
  AgentLink link;
};

struct FakeLifecycle final : JoinEvents {
  bool JobOver() const override { return over; }
  void Refuse(AgentLink& link, const std::string& why) override { refused.emplace_back(&link, why); }
  void OnMembershipComplete(const JobSpec& j, size_t max, const std::vector<std::pair<int, AgentLink*>>& s) override {
    job = j;
    max_connections = max;
    seats = s;
  }
  void OnJoinFailed(int code) override { failed = code; }
  bool PlaceFree(int candidate) const override { return free.contains(candidate); }
  void OnRejoined(int candidate, AgentLink& link) override { rejoined.emplace_back(candidate, &link); }

  bool over = false;
  std::set<int> free;
  std::vector<std::pair<AgentLink*, std::string>> refused;
  std::optional<JobSpec> job;
  size_t max_connections = 0;
  std::vector<std::pair<int, AgentLink*>> seats;
  std::optional<int> failed;
  std::vector<std::pair<int, AgentLink*>> rejoined;
};

NodeModeSpec Spec(int min_nodes, int max_nodes) {
  NodeModeSpec spec;
  spec.job.plan_options.program.program = "/bin/true";
  spec.job.plan_options.job_id = "job1";
  spec.min_nodes = min_nodes;
  spec.max_nodes = max_nodes;
  spec.join_timeout = seconds(60);
  spec.last_call_timeout = seconds(5);
  spec.own_host = "host0";
  spec.own_slots = 2;
  return spec;
}

control::Register Join(const std::string& host, int slots, int node_rank = -1) {
  control::Register reg;
  reg.job_id = "job1";
  reg.host = host;
  reg.slots = slots;
  reg.node_rank = node_rank;
  return reg;
}

struct Fixture {
  explicit Fixture(NodeModeSpec spec, JoinSizing sizing = {{}, UINT64_MAX, 100000})
      : console(-1, pipe.fds[1]), join(std::move(spec), sizing, loop, console, lifecycle) {}
  ConsolePipe pipe;
  Console console;
  FakeJobLoop loop;
  FakeLifecycle lifecycle;
  NoLinkEvents link_events;
  JoinPhase join;

  // This node joins; the membership decides at once (it waits, unless the job has one node).
  void Open() {
    join.Open("job1", 29400);
    join.Reconsider();
  }
};

TEST_CASE("JoinPhase: the last of max nodes completes the membership, this node as node 0") {
  Fixture f(Spec(2, 2));
  f.Open();
  CHECK(f.pipe.Drain() ==
        "dslaunch: rendezvous of job job1 for 2 nodes at port 29400: waiting up to 60 s for the other nodes\n");
  CHECK(f.loop.NextDeadline() == f.loop.now + seconds(60));  // the join timeout

  Agent a(f.link_events);
  REQUIRE(f.join.OnJoin(a.link, Join("host1", 3)).ok());
  CHECK(f.pipe.Drain() ==
        "dslaunch: rendezvous: host1 joined (2 of 2)\n"
        "dslaunch: rendezvous complete: 2 nodes, 5 workers: host0 (2), host1 (3)\n");
  REQUIRE(f.lifecycle.job.has_value());
  const JobSpec& job = *f.lifecycle.job;
  REQUIRE(job.candidates.size() == 2);
  CHECK(job.candidates[0].host == "host0");
  CHECK(job.candidates[1].host == "host1");
  CHECK(job.everyone.world_size == 5);
  CHECK(job.everyone.nodes[1].host == "host1");
  CHECK(job.everyone.nodes[1].workers.empty());  // planned again by every generation
  CHECK(job.elastic.min_nodes == 2);
  CHECK(job.elastic.max_nodes == 2);
  CHECK(f.lifecycle.max_connections == 100000);  // never lower than the bound so far
  CHECK(f.lifecycle.seats == std::vector<std::pair<int, AgentLink*>>{{1, &a.link}});
  CHECK(f.loop.armed() == 0);
  CHECK(a.conn->sent.empty());
}

TEST_CASE("JoinPhase: too few nodes by the join timeout fails the job and releases the joined ones") {
  Fixture f(Spec(3, 3));
  f.Open();
  Agent a(f.link_events);
  REQUIRE(f.join.OnJoin(a.link, Join("host1", 1)).ok());
  f.pipe.Drain();

  f.loop.Advance(std::chrono::milliseconds(59999));
  CHECK_FALSE(f.lifecycle.failed.has_value());
  f.loop.Advance(std::chrono::milliseconds(1));
  CHECK(f.lifecycle.failed == kExitInfrastructure);
  CHECK(f.pipe.Drain() ==
        "dslaunch: rendezvous failed: only 2 of at least 3 nodes joined within 60 s (joined: host0 (endpoint), "
        "host1); start the others with the same --rdzv_endpoint, --rdzv_id and secret, or raise --rdzv_conf "
        "join_timeout\n");
  REQUIRE(a.conn->sent.size() == 1);
  const auto* release = std::get_if<control::Release>(&a.conn->sent[0]);
  REQUIRE(release != nullptr);
  CHECK(release->generation == 0);
  CHECK(release->exit_code == kExitInfrastructure);
  CHECK(a.conn->closed);
  CHECK_FALSE(f.lifecycle.job.has_value());
}

TEST_CASE("JoinPhase: a signal while joining releases the joined nodes with the signal's code") {
  Fixture f(Spec(2, 3));
  f.Open();
  Agent a(f.link_events);
  REQUIRE(f.join.OnJoin(a.link, Join("host1", 1)).ok());
  f.pipe.Drain();
  f.join.Fail("the launcher received SIGTERM", 143);
  CHECK(f.pipe.Drain() == "dslaunch: rendezvous failed: the launcher received SIGTERM\n");
  CHECK(f.lifecycle.failed == 143);
  REQUIRE(a.conn->sent.size() == 1);
  CHECK(std::get<control::Release>(a.conn->sent[0]).exit_code == 143);
  CHECK(f.loop.armed() == 0);  // the last call's timer is gone
}

TEST_CASE("JoinPhase: a node that leaves before the start frees its place for another") {
  Fixture f(Spec(3, 3));
  f.Open();
  Agent a(f.link_events), b(f.link_events), c(f.link_events);
  REQUIRE(f.join.OnJoin(a.link, Join("host1", 1)).ok());
  f.pipe.Drain();
  f.join.OnLeft(a.link.arrival());
  CHECK(f.pipe.Drain() == "dslaunch: rendezvous: host1 left before the start\n");
  f.join.OnLeft(a.link.arrival());  // reported once only
  CHECK(f.pipe.Drain().empty());
  REQUIRE(f.join.OnJoin(b.link, Join("host2", 1)).ok());
  REQUIRE(f.join.OnJoin(c.link, Join("host3", 1)).ok());
  REQUIRE(f.lifecycle.job.has_value());
  CHECK(f.lifecycle.job->candidates[1].host == "host2");
  CHECK(f.lifecycle.job->candidates[2].host == "host3");
  CHECK(f.lifecycle.seats == std::vector<std::pair<int, AgentLink*>>{{1, &b.link}, {2, &c.link}});
}

TEST_CASE("JoinPhase: once the job runs, a node rejoins only in a free place of a lost member") {
  Fixture f(Spec(2, 2));
  f.Open();
  Agent first(f.link_events);
  REQUIRE(f.join.OnJoin(first.link, Join("host1", 1)).ok());
  REQUIRE(f.lifecycle.job.has_value());
  f.pipe.Drain();

  // The lost member's place is still held: come back later (the infrastructure class).
  Agent early(f.link_events);
  REQUIRE(f.join.OnJoin(early.link, Join("host1", 1)).ok());
  const std::string held = "the place of node 1 (host1) is still held by a live member of the job; try again later";
  CHECK(f.pipe.Drain() == "dslaunch: rendezvous: not letting host1 in: " + held + "\n");
  REQUIRE(early.conn->sent.size() == 1);
  const auto& release = std::get<control::Release>(early.conn->sent[0]);
  CHECK(release.exit_code == kExitInfrastructure);
  CHECK(release.reason == held);
  CHECK(early.conn->closed);
  CHECK(f.lifecycle.rejoined.empty());

  // Free: it takes the place.
  f.lifecycle.free = {1};
  Agent again(f.link_events);
  REQUIRE(f.join.OnJoin(again.link, Join("host1", 1)).ok());
  CHECK(f.pipe.Drain() == "dslaunch: rendezvous: host1 rejoined in the place of node 1\n");
  CHECK(f.lifecycle.rejoined == std::vector<std::pair<int, AgentLink*>>{{1, &again.link}});
  CHECK(again.conn->sent.empty());

  // A host that was never a member.
  Agent stranger(f.link_events);
  REQUIRE(f.join.OnJoin(stranger.link, Join("host9", 1)).ok());
  REQUIRE(f.lifecycle.refused.size() == 1);
  CHECK(f.lifecycle.refused[0].first == &stranger.link);
  CHECK(f.lifecycle.refused[0].second ==
        "node 'host9' is not one of this job's nodes; once the job runs, a node can only rejoin in the place of a "
        "lost one (same --node_rank, or same host)");

  // The job is over: nobody joins.
  f.lifecycle.over = true;
  Agent late(f.link_events);
  REQUIRE(f.join.OnJoin(late.link, Join("host1", 1)).ok());
  CHECK(f.lifecycle.refused.back() == std::pair<AgentLink*, std::string>{&late.link, "the job is over"});
}

TEST_CASE("JoinPhase: a membership that does not fit the descriptor limit fails before any worker starts") {
  JoinSizing sizing;
  sizing.max_connections = 10;
  sizing.descriptor_limit = 64;  // far below what 1000 workers need on the direct path
  NodeModeSpec spec = Spec(2, 2);
  Fixture f(std::move(spec), sizing);
  f.Open();
  Agent a(f.link_events);
  REQUIRE(f.join.OnJoin(a.link, Join("host1", 998)).ok());
  CHECK(f.lifecycle.failed == kExitUsage);
  CHECK_FALSE(f.lifecycle.job.has_value());
  CHECK(std::get<control::Release>(a.conn->sent.at(0)).exit_code == kExitUsage);
}

}  // namespace
}  // namespace dslaunch::launcher
