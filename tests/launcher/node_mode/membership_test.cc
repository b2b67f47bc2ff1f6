#include "launcher/node_mode/membership.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

JoinRequest Node(std::string host, std::optional<int> rank = std::nullopt, bool endpoint = false) {
  return JoinRequest{std::move(host), 2, rank, endpoint};
}

// The hosts in node-rank order.
std::vector<std::string> Order(const NodeMembership& m) {
  std::vector<std::string> hosts;
  for (int a : m.NodeRankOrder()) hosts.push_back(m.request(a).host);
  return hosts;
}

TEST_CASE("NodeMembership numbers nodes by arrival after the host node, which is always node 0") {
  NodeMembership m(3, 3);
  REQUIRE(m.Join(Node("c")).ok());
  REQUIRE(m.Join(Node("b")).ok());
  CHECK_FALSE(m.complete());
  CHECK(m.enough() == false);
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  CHECK(m.complete());
  CHECK(Order(m) == std::vector<std::string>{"a", "c", "b"});
}

TEST_CASE("NodeMembership keeps place 0 for the host node before it has joined: arrivals fill from place 1") {
  // Enough nodes without the host (MIN 2): an arrival must not take the host's place ahead of a
  // node that asked for rank 1.
  NodeMembership m(2, 3);
  REQUIRE(m.Join(Node("r1", 1)).ok());
  REQUIRE(m.Join(Node("x")).ok());
  REQUIRE(m.enough());
  CHECK(Order(m) == std::vector<std::string>{"r1", "x"});
}

TEST_CASE("NodeMembership puts asked-for ranks in their places and fills the rest by arrival") {
  NodeMembership m(4, 4);
  REQUIRE(m.Join(Node("x")).ok());
  REQUIRE(m.Join(Node("r3", 3)).ok());
  REQUIRE(m.Join(Node("r0", 0, true)).ok());
  REQUIRE(m.Join(Node("y")).ok());
  CHECK(Order(m) == std::vector<std::string>{"r0", "x", "y", "r3"});
}

TEST_CASE("NodeMembership refuses a taken rank, a rank outside --nnodes, and a node too many") {
  NodeMembership m(2, 2);
  REQUIRE(m.Join(Node("a", 0, true)).ok());
  auto taken = m.Join(Node("b", 0));
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.status().code() == StatusCode::kFailedPrecondition);
  CHECK(taken.status().message() ==
        "node 'b' asks for node rank 0, which node 'a' has (it hosts the rendezvous endpoint); give every node its own "
        "--node_rank");
  auto outside = m.Join(Node("c", 2));
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message() == "node 'c' asks for node rank 2, outside 0..1 of --nnodes");
  REQUIRE(m.Join(Node("d", 1)).ok());
  auto extra = m.Join(Node("e"));
  REQUIRE_FALSE(extra.ok());
  CHECK(extra.status().message() == "node 'e' arrived after all 2 nodes had joined; start at most --nnodes nodes");
}

TEST_CASE("NodeMembership keeps the last place for the host node's own agent") {
  NodeMembership m(2, 2);
  REQUIRE(m.Join(Node("b")).ok());
  auto extra = m.Join(Node("c"));
  REQUIRE_FALSE(extra.ok());
  CHECK(extra.status().message() ==
        "node 'c' arrived when 1 nodes and the host node make all 2 of --nnodes; start at most --nnodes nodes");
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  CHECK(Order(m) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("NodeMembership refuses a host node that asks for a rank other than 0") {
  NodeMembership m(2, 2);
  auto r = m.Join(Node("a", 1, true));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "node 'a' hosts the rendezvous endpoint but asks for node rank 1; the node at the endpoint is node 0 (give it "
        "--node_rank 0, or point --rdzv_endpoint at node 1's address)");
}

TEST_CASE("NodeMembership frees a place when a node leaves before the start, and closes up an elastic range") {
  NodeMembership m(2, 4);
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  auto b = m.Join(Node("b", 2));
  REQUIRE(b.ok());
  REQUIRE(m.Join(Node("c", 3)).ok());
  m.Leave(*b);
  CHECK(m.joined() == 2);
  CHECK(m.enough());
  CHECK_FALSE(m.complete());
  REQUIRE(m.Join(Node("b2", 2)).ok());  // rank 2 is free again
  CHECK(Order(m) == std::vector<std::string>{"a", "b2", "c"});  // closed up: 0, 2, 3 become 0, 1, 2
  CHECK(m.Describe() == "a (endpoint), c (rank 3), b2 (rank 2)");
}

}  // namespace
}  // namespace dslaunch::launcher

namespace dslaunch::launcher {
namespace {

using std::chrono::seconds;
const NodeMembership::TimePoint kStart{} ;

TEST_CASE("NodeMembership completes at MAX nodes at once, and at MIN after the last call") {
  NodeMembership m(2, 3, seconds(600), seconds(30), kStart);
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  JoinVerdict waiting = m.Decide(kStart + seconds(1));
  CHECK(waiting.kind == JoinVerdict::Kind::kWait);
  CHECK(waiting.wake_at == kStart + seconds(600));  // the join timeout
  REQUIRE(m.Join(Node("b")).ok());
  JoinVerdict last_call = m.Decide(kStart + seconds(10));
  CHECK(last_call.kind == JoinVerdict::Kind::kWait);
  CHECK(last_call.wake_at == kStart + seconds(40));  // 30 s from the moment MIN was reached
  CHECK(m.Decide(kStart + seconds(39)).kind == JoinVerdict::Kind::kWait);
  CHECK(m.Decide(kStart + seconds(40)).kind == JoinVerdict::Kind::kComplete);
  NodeMembership full(2, 2, seconds(600), seconds(30), kStart);
  REQUIRE(full.Join(Node("a", std::nullopt, true)).ok());
  REQUIRE(full.Join(Node("b")).ok());
  CHECK(full.Decide(kStart).kind == JoinVerdict::Kind::kComplete);  // no last call when full
}

TEST_CASE("NodeMembership fails at the join timeout with fewer than MIN, naming who came") {
  NodeMembership m(3, 3, seconds(5), seconds(30), kStart);
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  REQUIRE(m.Join(Node("b", 2)).ok());
  CHECK(m.Decide(kStart + seconds(4)).kind == JoinVerdict::Kind::kWait);
  JoinVerdict failed = m.Decide(kStart + seconds(5));
  CHECK(failed.kind == JoinVerdict::Kind::kFail);
  CHECK(failed.reason ==
        "only 2 of at least 3 nodes joined within 5 s (joined: a (endpoint), b (rank 2)); start the others with the "
        "same --rdzv_endpoint, --rdzv_id and secret, or raise --rdzv_conf join_timeout");
}

TEST_CASE("NodeMembership restarts the last call when a departure drops below MIN") {
  NodeMembership m(2, 3, seconds(600), seconds(30), kStart);
  REQUIRE(m.Join(Node("a", std::nullopt, true)).ok());
  auto b = m.Join(Node("b"));
  REQUIRE(b.ok());
  CHECK(m.Decide(kStart + seconds(10)).wake_at == kStart + seconds(40));
  m.Leave(*b);
  CHECK(m.Decide(kStart + seconds(20)).wake_at == kStart + seconds(600));
  REQUIRE(m.Join(Node("c")).ok());
  CHECK(m.Decide(kStart + seconds(50)).wake_at == kStart + seconds(80));
  Members members = m.InRankOrder();
  CHECK(members.line == "a (2), c (2)");
  REQUIRE(members.resources.size() == 2);
  CHECK(members.resources[1].host == "c");
  CHECK(members.resources[1].slots == std::vector<int>{0, 1});
  CHECK(members.asked_ranks == std::vector<std::optional<int>>{std::nullopt, std::nullopt});
}

TEST_CASE("ShowArrival gives thousands of arrivals about 26 lines, the first ones and every tenth") {
  int shown = 0;
  for (int joined = 1; joined <= 12500; ++joined) shown += ShowArrival(joined, 12500) ? 1 : 0;
  CHECK(shown == kNamedArrivals + 10);  // 16 named, then 1250, 2500, ..., 12500
  CHECK(ShowArrival(1, 12500));
  CHECK(ShowArrival(16, 12500));
  CHECK_FALSE(ShowArrival(17, 12500));
  CHECK(ShowArrival(1250, 12500));
  CHECK_FALSE(ShowArrival(1251, 12500));
  CHECK(ShowArrival(12500, 12500));
  for (int joined = 1; joined <= 4; ++joined) CHECK(ShowArrival(joined, 4));  // a small job: every one
}

TEST_CASE("The rendezvous line names at most kNamedMembers members and counts the rest") {
  NodeMembership m(1, 40);
  REQUIRE(m.Join(Node("h", std::nullopt, true)).ok());
  for (int i = 1; i < 40; ++i) REQUIRE(m.Join(Node("n" + std::to_string(i))).ok());
  Members members = m.InRankOrder();
  CHECK(members.resources.size() == 40);
  CHECK(members.line.starts_with("h (2), n1 (2), n2 (2), "));
  CHECK(members.line.ends_with(", n15 (2), ... and 24 more"));
}

}  // namespace
}  // namespace dslaunch::launcher
