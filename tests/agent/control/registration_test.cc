// The agent's registration (agent/control/registration.h) on a real socket pair: the launcher's
// end is written before the call and read after it.
#include "agent/control/registration.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/endpoint/endpoint_client.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

using std::chrono::milliseconds;

struct Link {
  Link() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    agent = UniqueFd(fds[0]);
    launcher = UniqueFd(fds[1]);
  }
  void FromLauncher(const control::Message& m) {
    wire::Frame f = control::Encode(m);
    REQUIRE(SendFrame(launcher.get(), f.type, f.payload).ok());
  }
  UniqueFd agent, launcher;
};

control::Register Registration() {
  control::Register reg;
  reg.job_id = "job-1";
  reg.node_rank = 2;
  reg.version = "0.1.0";
  reg.host = "node2";
  reg.pid = 4242;
  reg.slots = 0;
  return reg;
}

TEST_CASE("Register sends REGISTER and returns the assignment, skipping the heartbeats before it") {
  Link link;
  control::Assignment sent;
  sent.generation = 1;
  sent.node_rank = 2;
  sent.log_dir = "/logs/job-1";
  link.FromLauncher(control::Heartbeat{1, 7});
  link.FromLauncher(sent);
  std::optional<int> released;
  auto assignment = Register(link.agent.get(), Registration(), milliseconds(10000), released);
  REQUIRE_MESSAGE(assignment.ok(), assignment.status().ToString());
  CHECK(assignment->generation == 1);
  CHECK(assignment->node_rank == 2);
  CHECK(assignment->log_dir == "/logs/job-1");
  CHECK_FALSE(released);

  wire::FrameDecoder decoder;
  auto frame = ReceiveFrame(link.launcher.get(), decoder, std::chrono::steady_clock::now() + milliseconds(10000));
  REQUIRE(frame.ok());
  auto message = control::Decode(*frame);
  REQUIRE(message.ok());
  const auto& reg = std::get<control::Register>(*message);
  CHECK(reg.job_id == "job-1");
  CHECK(reg.node_rank == 2);
  CHECK(reg.host == "node2");
  CHECK(reg.pid == 4242);
}

TEST_CASE("Register hands over what the launcher sent right after the ASSIGNMENT") {
  Link link;
  control::Assignment sent;
  sent.generation = 0;
  link.FromLauncher(sent);
  link.FromLauncher(control::SnapshotPeers{0, {"10.0.0.2:4000"}});
  // Both frames are in the socket before Register reads: its first read takes them together.
  std::optional<int> released;
  std::string received;
  auto assignment = Register(link.agent.get(), Registration(), milliseconds(10000), released, &received);
  REQUIRE_MESSAGE(assignment.ok(), assignment.status().ToString());
  wire::FrameDecoder decoder;
  decoder.Feed(received.data(), received.size());
  auto frame = decoder.Next();
  REQUIRE(frame.ok());
  REQUIRE(frame->has_value());
  auto message = control::Decode(**frame);
  REQUIRE(message.ok());
  CHECK(std::get<control::SnapshotPeers>(*message).peers == std::vector<std::string>{"10.0.0.2:4000"});
}

TEST_CASE("Register: a STOP is a refusal, a RELEASE a job that ended or a place still held") {
  struct Case {
    std::string name;
    control::Message reply;
    StatusCode code;
    std::string message;
    std::optional<int> released;
  };
  const std::vector<Case> cases = {
      {"refused", control::Stop{0, 0, "node rank 2 is taken"}, StatusCode::kAborted,
       "the launcher refused this agent: node rank 2 is taken", std::nullopt},
      {"not let in", control::Release{0, 75, "the place of node 2 (node2) is still held"}, StatusCode::kUnavailable,
       "the launcher did not let this node in: the place of node 2 (node2) is still held (exit code 75)", 75},
      {"ended before it started", control::Release{0, 3, ""}, StatusCode::kUnavailable,
       "the launcher ended the job before it started (exit code 3)", 3},
      {"ended, no code", control::Release{0, -1, ""}, StatusCode::kUnavailable,
       "the launcher ended the job before it started (exit code -1)", std::nullopt},
      {"another message", control::AgentDone{0}, StatusCode::kInvalidArgument,
       "expected an assignment, got message type 70", std::nullopt},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Link link;
    link.FromLauncher(c.reply);
    std::optional<int> released;
    auto assignment = Register(link.agent.get(), Registration(), milliseconds(10000), released);
    REQUIRE_FALSE(assignment.ok());
    CHECK(assignment.status().code() == c.code);
    CHECK(assignment.status().message() == c.message);
    CHECK(released == c.released);
  }
}

TEST_CASE("Register waits for the assignment no longer than its timeout") {
  Link link;
  std::optional<int> released;
  auto assignment = Register(link.agent.get(), Registration(), milliseconds(50), released);
  REQUIRE_FALSE(assignment.ok());
  CHECK(assignment.status().code() == StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace dslaunch::agent
