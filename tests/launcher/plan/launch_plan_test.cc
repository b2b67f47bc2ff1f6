#include "launcher/plan/launch_plan.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "launcher/plan/env_contract.h"

namespace dslaunch::launcher {
namespace {

using Argv = std::vector<std::string>;

PlanOptions ScriptOptions() {
  PlanOptions options;
  options.program.kind = ProgramKind::kPythonScript;
  options.program.program = "train.py";
  options.program.args = {"--lr", "3e-4"};
  options.job_id = "job-1";
  options.store_address = "10.0.0.1:41000";
  return options;
}

TEST_CASE("A train.json runs the bundled runtime's train command, without --local_rank") {
  ProgramSpec p;
  p.kind = ProgramKind::kTrainConfig;
  p.program = "configs/gpt-demo.json";
  p.worker = "/opt/dslaunch/bin/dslaunch-worker";
  p.args = {"--extra"};
  CHECK(WorkerArgv(p, 3) ==
        std::vector<std::string>{"/opt/dslaunch/bin/dslaunch-worker", "train", "configs/gpt-demo.json", "--extra"});
}

TEST_CASE("ClassifyProgram decides how PROGRAM runs from its name and the flags") {
  struct Case {
    const char* program;
    bool no_python;
    bool module;
    ProgramKind want;
  };
  const std::vector<Case> cases = {
      {"train.py", false, false, ProgramKind::kPythonScript},
      {"/abs/dir/train.py", false, false, ProgramKind::kPythonScript},
      {"train.py", true, false, ProgramKind::kExecutable},
      {"pkg.train", false, true, ProgramKind::kPythonModule},
      {"train.py", false, true, ProgramKind::kPythonModule},
      {"train.py", true, true, ProgramKind::kExecutable},  // --no_python wins; the CLI rejects it
      {"./a.out", false, false, ProgramKind::kExecutable},
      {"/bin/true", false, false, ProgramKind::kExecutable},
      {"train.json", false, false, ProgramKind::kTrainConfig},
      {"configs/gpt-demo.json", false, false, ProgramKind::kTrainConfig},
      {"train.json", true, false, ProgramKind::kExecutable},
      {".json", false, false, ProgramKind::kExecutable},
      {".py", false, false, ProgramKind::kExecutable},
      {"dir.py/run", false, false, ProgramKind::kExecutable},
      {"train.PY", false, false, ProgramKind::kExecutable},
  };
  for (const Case& c : cases) {
    CAPTURE(c.program);
    CAPTURE(c.no_python);
    CAPTURE(c.module);
    CHECK(ClassifyProgram(c.program, c.no_python, c.module) == c.want);
  }
}

TEST_CASE("WorkerArgv puts --local_rank after the script and before the user's arguments") {
  struct Case {
    const char* name;
    ProgramSpec program;
    Argv want;
  };
  const std::vector<Case> cases = {
      {"script", {ProgramKind::kPythonScript, "train.py", {"--lr", "3e-4"}, true, "python3"},
       {"python3", "-u", "train.py", "--local_rank=2", "--lr", "3e-4"}},
      {"script without local rank", {ProgramKind::kPythonScript, "train.py", {"--lr", "3e-4"}, false, "python3"},
       {"python3", "-u", "train.py", "--lr", "3e-4"}},
      {"module", {ProgramKind::kPythonModule, "pkg.train", {"x"}, true, "python3"},
       {"python3", "-u", "-m", "pkg.train", "--local_rank=2", "x"}},
      {"module without local rank", {ProgramKind::kPythonModule, "pkg.train", {}, false, "python3"},
       {"python3", "-u", "-m", "pkg.train"}},
      {"executable never gets --local_rank", {ProgramKind::kExecutable, "./a.out", {"-n", "1"}, true, "python3"},
       {"./a.out", "-n", "1"}},
      {"custom interpreter", {ProgramKind::kPythonScript, "t.py", {}, true, "/opt/py/bin/python3.11"},
       {"/opt/py/bin/python3.11", "-u", "t.py", "--local_rank=2"}},
      {"arguments pass through untouched", {ProgramKind::kExecutable, "echo", {"", "a b", "--local_rank=9"}, true, ""},
       {"echo", "", "a b", "--local_rank=9"}},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name) { CHECK(WorkerArgv(c.program, 2) == c.want); }
  }
}

TEST_CASE("PlanLaunch assigns node ranks in order and global ranks node by node") {
  Resources resources = {{"", "worker-0", {0, 1}}, {"alice", "worker-1", {2, 3, 5}}};
  Result<LaunchPlan> plan = PlanLaunch(resources, ScriptOptions());
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  CHECK(plan->world_size == 5);
  CHECK(plan->job_id == "job-1");
  CHECK(plan->store_address == "10.0.0.1:41000");
  CHECK(plan->master_port == 29500);
  REQUIRE(plan->nodes.size() == 2);

  const NodePlan& n0 = plan->nodes[0];
  const NodePlan& n1 = plan->nodes[1];
  CHECK(n0.node_rank == 0);
  CHECK(n0.host == "worker-0");
  CHECK(n0.user.empty());
  CHECK(n0.slots == std::vector<int>{0, 1});
  CHECK(n1.node_rank == 1);
  CHECK(n1.user == "alice");
  CHECK(n1.slots == std::vector<int>{2, 3, 5});

  std::vector<std::pair<int, int>> ranks;  // (rank, local_rank) in plan order
  for (const NodePlan& node : plan->nodes) {
    for (const WorkerPlan& w : node.workers) ranks.emplace_back(w.rank, w.local_rank);
  }
  CHECK(ranks == std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 0}, {3, 1}, {4, 2}});
  CHECK(n1.workers[2].argv == Argv{"python3", "-u", "train.py", "--local_rank=2", "--lr", "3e-4"});
}

TEST_CASE("LocalRankOf finds a global rank's local rank on its node, and -1 elsewhere") {
  Result<LaunchPlan> plan = PlanLaunch({{"", "worker-0", {0, 1}}, {"", "worker-1", {2, 3, 5}}}, ScriptOptions());
  REQUIRE(plan.ok());
  const NodePlan& n1 = plan->nodes[1];
  CHECK(LocalRankOf(n1, 2) == 0);
  CHECK(LocalRankOf(n1, 3) == 1);
  CHECK(LocalRankOf(n1, 4) == 2);
  CHECK(LocalRankOf(n1, 1) == -1);  // node 0's
  CHECK(LocalRankOf(n1, 5) == -1);  // past the job
  CHECK(LocalRankOf(plan->nodes[0], 1) == 1);
  CHECK(LocalRankOf(NodePlan{}, 0) == -1);
}

TEST_CASE("PlanLaunch gives every worker the contract environment") {
  PlanOptions options = ScriptOptions();
  options.extra_env = {{"NCCL_DEBUG", "INFO"}, {"RANK", "99"}};
  Resources resources = {{"", "worker-0", {0, 1}}, {"", "worker-1", {4}}};
  Result<LaunchPlan> plan = PlanLaunch(resources, options);
  REQUIRE(plan.ok());
  for (const NodePlan& node : plan->nodes) {
    for (const WorkerPlan& worker : node.workers) {
      CAPTURE(worker.rank);
      std::map<std::string, std::string> env = PlannedEnvironment(node, worker);
      CHECK(env == WorkerEnvironment(*plan, node, worker, options.extra_env));
      CHECK(env.at("RANK") == std::to_string(worker.rank));
      CHECK(env.at("NCCL_DEBUG") == "INFO");
    }
  }
  CHECK(plan->nodes[1].env.at("CUDA_VISIBLE_DEVICES") == "4");
  CHECK(plan->nodes[1].env.at("LOCAL_WORLD_SIZE") == "1");
}

TEST_CASE("PlanLaunch keeps a node's variables once per node, so a plan grows linearly with its ranks") {
  PlanOptions options = ScriptOptions();
  options.extra_env = {{"PYTHONPATH", std::string(1000, 'p')}};
  std::vector<int> slots(kMaxSlotsPerHost);
  for (int i = 0; i < kMaxSlotsPerHost; ++i) slots[static_cast<std::size_t>(i)] = i;
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", slots}, {"", "b", slots}}, options);
  REQUIRE(plan.ok());
  CHECK(plan->world_size == 2 * kMaxSlotsPerHost);
  for (const NodePlan& node : plan->nodes) {
    CHECK(node.env.at("CUDA_VISIBLE_DEVICES") == JoinSlots(slots));
    CHECK(node.env.at("PYTHONPATH").size() == 1000);
    for (const WorkerPlan& worker : node.workers) {
      // Only what differs between the node's workers.
      CHECK(worker.env.empty());  // computed when sent, not kept per rank
      const auto own = WorkerOwnEnvironment(worker);
      REQUIRE(own.size() == 3);
      CHECK(own.at("RANK") == std::to_string(worker.rank));
      CHECK(own.at("ROLE_RANK") == std::to_string(worker.rank));
      CHECK(own.at("LOCAL_RANK") == std::to_string(worker.local_rank));
    }
  }
}

TEST_CASE("PlanLaunch with no_devices gives every worker an empty CUDA_VISIBLE_DEVICES") {
  PlanOptions options = ScriptOptions();
  options.no_devices = true;
  Result<LaunchPlan> plan = PlanLaunch({{"", "localhost", {0, 1}}}, options);
  REQUIRE(plan.ok());
  CHECK(plan->no_devices);
  CHECK(plan->nodes[0].env.at("CUDA_VISIBLE_DEVICES").empty());
  CHECK(plan->nodes[0].slots == std::vector<int>{0, 1});
}

TEST_CASE("PlanLaunch picks MASTER_ADDR from the options or the first node") {
  struct Case {
    const char* first_host;
    const char* master_addr;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"localhost", "", "127.0.0.1"},
      {"LocalHost", "", "127.0.0.1"},
      {"worker-0", "", "worker-0"},
      {"10.1.2.3", "", "10.1.2.3"},
      {"fe80::1", "", "fe80::1"},
      {"localhost", "192.168.1.5", "192.168.1.5"},
      {"worker-0", "node-a", "node-a"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.first_host);
    CAPTURE(c.master_addr);
    PlanOptions options = ScriptOptions();
    options.master_addr = c.master_addr;
    Result<LaunchPlan> plan = PlanLaunch({{"", c.first_host, {0}}, {"", "other", {0}}}, options);
    REQUIRE(plan.ok());
    CHECK(plan->master_addr == c.want);
    CHECK(plan->nodes[1].env.at("MASTER_ADDR") == c.want);
  }
}

TEST_CASE("PlanLaunch rejects an empty selection and out-of-range options") {
  struct Case {
    const char* name;
    Resources resources;
    PlanOptions options;
    std::string error;
  };
  auto with = [](auto edit) {
    PlanOptions o = ScriptOptions();
    edit(o);
    return o;
  };
  const Resources one = {{"", "a", {0}}};
  const std::vector<Case> cases = {
      {"no nodes", {}, ScriptOptions(), "no slot selected: nothing to launch"},
      {"node without slots", {{"", "a", {}}}, ScriptOptions(), "host 'a' has no slot selected"},
      {"node without host", {{"", "", {0}}}, ScriptOptions(), "a selected node has an empty host name"},
      {"repeated slot", {{"", "a", {1, 1}}}, ScriptOptions(), "host 'a': slot 1 selected twice"},
      {"negative slot", {{"", "a", {-1}}}, ScriptOptions(), "host 'a': negative slot id -1"},
      {"port zero", one, with([](PlanOptions& o) { o.master_port = 0; }),
       "--master_port 0 is outside 1..65535"},
      {"port too large", one, with([](PlanOptions& o) { o.master_port = 65536; }),
       "--master_port 65536 is outside 1..65535"},
      {"empty program", one, with([](PlanOptions& o) { o.program.program.clear(); }),
       "no program to launch (empty PROGRAM)"},
      {"empty python", one, with([](PlanOptions& o) { o.program.python.clear(); }),
       "empty python interpreter for 'train.py'"},
      {"negative generation", one, with([](PlanOptions& o) { o.generation = -1; }),
       "negative generation -1"},
      {"env name with =", one, with([](PlanOptions& o) { o.extra_env["A=B"] = "x"; }),
       "invalid environment variable 'A=B' (names must be non-empty without '=', no NUL anywhere)"},
      {"empty env name", one, with([](PlanOptions& o) { o.extra_env[""] = "x"; }),
       "invalid environment variable '' (names must be non-empty without '=', no NUL anywhere)"},
      {"core list shorter than a node's ranks", {{"", "a", {0}}, {"", "b", {0, 1, 2}}},
       with([](PlanOptions& o) {
         o.bind_cores_to_rank = true;
         o.bind_core_list = {4, 5};
       }),
       "--bind_core_list '4-5' gives 2 cores but host 'b' runs 3 local ranks; each rank needs at least one core: "
       "list more cores or run fewer ranks per node"},
      {"core list without binding", one, with([](PlanOptions& o) { o.bind_core_list = {0}; }),
       "--bind_core_list '0' needs --bind_cores_to_rank"},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name) {
      Result<LaunchPlan> plan = PlanLaunch(c.resources, c.options);
      REQUIRE_FALSE(plan.ok());
      CHECK(plan.status().code() == StatusCode::kInvalidArgument);
      CHECK(plan.status().message() == c.error);
    }
  }
}

TEST_CASE("PlanLaunch accepts an executable without a python interpreter") {
  PlanOptions options;
  options.program = {ProgramKind::kExecutable, "/bin/true", {}, true, ""};
  Result<LaunchPlan> plan = PlanLaunch({{"", "localhost", {0, 1}}}, options);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  CHECK(plan->nodes[0].workers[1].argv == Argv{"/bin/true"});
  CHECK(WorkerOwnEnvironment(plan->nodes[0].workers[1]).at("LOCAL_RANK") == "1");
  CHECK(plan->nodes[0].env.at("LOCAL_WORLD_SIZE") == "2");
}

}  // namespace
}  // namespace dslaunch::launcher
