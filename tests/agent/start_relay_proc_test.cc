// The start relay (`dslaunch-agent --start_relay`, agent/start_relay.h) as a real process, without
// SSH: a plan with an empty subtree, then the head's own agent (a stand-in script) started, killed
// or refused, each end reported on stdout in the relay's lines (docs/protocol.md, "Start relay
// lines"). Its SSH side is covered by tests/launcher/start_tree_cluster_test.cc.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kAgent = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-agent";
constexpr std::chrono::seconds kTimeout{30};

const char* kPlan =
    R"(plan {"ssh":{"user":"","port":22,"identities":[],"known_hosts":"/dev/null","accept_new_host_keys":false,)"
    R"("connect_timeout_ms":1000,"fanout":2},"checks":{"agent_path":"a","agent_version":"v","working_directory":""},)"
    R"("self":3,"nodes":[]})";

std::string StartLine(const std::string& agent, int rank) {
  return R"(start {"rank":)" + std::to_string(rank) + R"(,"agent_path":")" + agent +
         R"(","endpoint_host":"10.1.2.3","endpoint_port":4242,"job_id":"j1"})";
}

// Runs the relay with `lines` on its stdin.
ProcessResult RunRelay(const TempDir& dir, const std::vector<std::string>& lines) {
  const std::string input = dir.path() + "/input";
  std::ofstream in(input);
  for (const std::string& l : lines) in << l << "\n";
  in.close();
  return RunProcess({"/bin/sh", "-c", "exec \"$0\" --start_relay < \"$1\"", kAgent, input}, kTimeout);
}

std::string Script(const TempDir& dir, const std::string& body) {
  const std::string path = dir.path() + "/fake-agent";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST_CASE("The start relay checks an empty subtree, starts its own agent with the secret on stdin and reports its end") {
  TempDir dir;
  const std::string agent = Script(dir, "read -r s; echo \"secret=$s args=$*\"; exit 7");
  auto r = RunRelay(dir, {kPlan, "secret s3cret", StartLine(agent, 3)});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // The head's own agent writes to the relay's stdout unprefixed, and is told the given endpoint.
  CHECK(Contains(r.out, "dslaunch-relay checked\n"));
  CHECK(Contains(r.out, "secret=s3cret args=--endpoint 10.1.2.3:4242 --job_id j1 --node_rank 3\n"));
  CHECK(Contains(r.out, "dslaunch-relay exit 3 code:7 agent process ended\n"));
  CHECK(r.out.find("dslaunch-relay checked") < r.out.find("secret="));
}

TEST_CASE("The start relay kills an agent when told to, and refuses a node outside its subtree") {
  TempDir dir;
  const std::string agent = Script(dir, "read -r s; exec sleep 60");
  auto r = RunRelay(dir, {kPlan, "secret s", StartLine(agent, 3), "kill 3", StartLine(agent, 5)});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.seconds < 30);
  CHECK(Contains(r.out, "dslaunch-relay exit 3 signal:9 agent process ended\n"));
  CHECK(Contains(r.out, "dslaunch-relay exit 5 none the start relay could not start the agent: node 5 is not in this "
                        "relay's subtree\n"));
}

TEST_CASE("The start relay refuses to start before it has the secret, and exits 3 without a plan") {
  TempDir dir;
  const std::string agent = Script(dir, "echo started");
  auto r = RunRelay(dir, {kPlan, StartLine(agent, 3)});
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "dslaunch-relay exit 3 none the start relay could not start the agent: no secret before the "
                        "start line\n"));
  CHECK_FALSE(Contains(r.out, "started"));

  auto bad = RunRelay(dir, {"hello"});
  CHECK(bad.exit_code == 3);
  CHECK(Contains(bad.err, "dslaunch-agent --start_relay: expected a plan line first: start relay: unknown command "
                          "'hello'"));
}

}  // namespace
}  // namespace dslaunch::testing
