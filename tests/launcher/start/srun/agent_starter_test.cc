// The pure parts of SrunAgentStarter: srun's command lines, the pre-flight answers, the step line.
// The starter itself runs against a real Slurm in tests/launcher/slurm/slurm_cluster_test.cc.
#include "launcher/start/srun/agent_starter.h"

#include <doctest/doctest.h>

#include <algorithm>

namespace dslaunch::launcher {
namespace {

bool Has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

TEST_CASE("SrunAgentArgv: one task on the node, overlapping, never killing other steps, the agent argv last") {
  SrunOptions o;
  o.cpus_per_node["n2"] = 16;
  const std::vector<std::string> agent = {"/opt/dslaunch-agent", "--endpoint", "10.0.0.1:4000", "--node_rank", "1"};
  auto argv = SrunAgentArgv(o, "n2", agent);
  CHECK(argv.front() == "srun");
  for (const char* w : {"--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=n2", "--overlap",
                        "--kill-on-bad-exit=0", "--cpus-per-task=16"}) {
    CAPTURE(w);
    CHECK(Has(argv, w));
  }
  // No --input option: srun's default forwards its stdin (the secret) to the one task.
  CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string& w) { return w.starts_with("--input"); }));
  REQUIRE(argv.size() > agent.size());
  CHECK(std::equal(agent.begin(), agent.end(), argv.end() - static_cast<long>(agent.size())));
  CHECK(!Has(SrunAgentArgv(o, "n1", agent), "--cpus-per-task=16"));
}

TEST_CASE("SrunPreflightArgv: one task per node, no stdin, the checks quoted") {
  PreflightChecks checks{"/opt/my agent", "dslaunch-agent 0.1.0", "/work dir"};
  auto argv = SrunPreflightArgv({}, {"a", "b", "c"}, checks);
  for (const char* w : {"--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--nodelist=a,b,c", "--input=none"}) {
    CAPTURE(w);
    CHECK(Has(argv, w));
  }
  const std::string& script = argv.back();
  CHECK(script.find("cd -- '/work dir'") != std::string::npos);
  CHECK(script.find("'/opt/my agent' --version") != std::string::npos);
  CHECK(script.find("SLURMD_NODENAME") != std::string::npos);
}

TEST_CASE("ParseSrunPreflightLine reads node, code and text") {
  auto ok = ParseSrunPreflightLine("dslaunch-preflight n01 0 dslaunch-agent 0.1.0 ");
  REQUIRE(ok);
  CHECK(ok->node == "n01");
  CHECK(ok->code == 0);
  CHECK(ok->text == "dslaunch-agent 0.1.0");
  auto failed = ParseSrunPreflightLine("dslaunch-preflight n02 127 sh: 1: /x: not found");
  REQUIRE(failed);
  CHECK(failed->code == 127);
  CHECK(!ParseSrunPreflightLine("dslaunch-preflight n01"));
  CHECK(!ParseSrunPreflightLine("hello n01 0 x"));
  CHECK(!ParseSrunPreflightLine("dslaunch-preflight n01 x y"));
}

TEST_CASE("SrunPreflightFailures names every failing node with its reason, and silent nodes with srun's") {
  PreflightChecks checks{"/a", "dslaunch-agent 0.1.0", "/w"};
  std::vector<NodePlan> nodes(4);
  for (int i = 0; i < 4; ++i) {
    nodes[i].node_rank = i;
    nodes[i].host = "n" + std::to_string(i);
  }
  std::vector<SrunPreflightLine> answers = {{"n3", 97, ""},
                                            {"n0", 0, "dslaunch-agent 0.1.0"},
                                            {"n1", 0, "dslaunch-agent 0.0.9"}};
  auto failures = SrunPreflightFailures(nodes, checks, answers, "srun exited with exit code 1 (node n2 is down)");
  REQUIRE(failures.size() == 3);
  CHECK(failures[0].node_rank == 1);
  CHECK(failures[0].reason.find("reports 'dslaunch-agent 0.0.9'") != std::string::npos);
  CHECK(failures[1].node_rank == 2);
  CHECK(failures[1].reason.find("no answer") != std::string::npos);
  CHECK(failures[1].reason.find("node n2 is down") != std::string::npos);
  CHECK(failures[2].node_rank == 3);
  CHECK(failures[2].reason.find("working directory '/w'") != std::string::npos);
}

TEST_CASE("ParseStepLine takes the step id and nothing else") {
  CHECK(ParseStepLine("dslaunch-step 12.3") == std::optional<std::string>("12.3"));
  CHECK(!ParseStepLine("dslaunch-step 12.3; rm -rf /"));
  CHECK(!ParseStepLine("dslaunch-step "));
  CHECK(!ParseStepLine("[rank 0] dslaunch-step 1.2"));
}

}  // namespace
}  // namespace dslaunch::launcher
