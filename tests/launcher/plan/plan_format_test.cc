#include "launcher/plan/env_contract.h"
#include "launcher/plan/plan_format.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

using nlohmann::json;

LaunchPlan SamplePlan() {
  PlanOptions options;
  options.program = {ProgramKind::kPythonScript, "train.py", {"--name", "my run"}, true, "python3"};
  options.job_id = "j1";
  options.generation = 2;
  options.store_address = "10.0.0.9:41000";
  options.extra_env = {{"NCCL_DEBUG", "INFO"}};
  Result<LaunchPlan> plan = PlanLaunch({{"", "worker-0", {0, 1}}, {"bob", "worker-1", {3}}}, options);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  return *plan;
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST_CASE("FormatPlanJson parses back with every field of the plan") {
  LaunchPlan plan = SamplePlan();
  std::string text = FormatPlanJson(plan);
  CHECK(text.back() == '\n');
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  REQUIRE_FALSE(doc.is_discarded());

  CHECK(doc.at("version") == kPlanJsonVersion);
  CHECK(doc.at("job_id") == "j1");
  CHECK(doc.at("generation") == 2);
  CHECK(doc.at("world_size") == 3);
  CHECK(doc.at("master_addr") == "worker-0");
  CHECK(doc.at("master_port") == 29500);
  CHECK(doc.at("store_address") == "10.0.0.9:41000");
  REQUIRE(doc.at("nodes").size() == 2);

  const json& node1 = doc.at("nodes").at(1);
  CHECK(node1.at("node_rank") == 1);
  CHECK(node1.at("user") == "bob");
  CHECK(node1.at("host") == "worker-1");
  CHECK(node1.at("slots") == json::array({3}));
  REQUIRE(node1.at("workers").size() == 1);
  const json& worker = node1.at("workers").at(0);
  CHECK(worker.at("rank") == 2);
  CHECK(worker.at("local_rank") == 0);
  CHECK(worker.at("argv") ==
        json::array({"python3", "-u", "train.py", "--local_rank=0", "--name", "my run"}));
  CHECK(worker.at("env") == json{{"LOCAL_RANK", "0"}, {"RANK", "2"}, {"ROLE_RANK", "2"}});
  CHECK(node1.at("env").at("CUDA_VISIBLE_DEVICES") == "3");
  CHECK(node1.at("env").at("NCCL_DEBUG") == "INFO");
  CHECK(node1.at("env").count("RANK") == 0);

  // Every env entry of every node and worker survives the round trip.
  for (std::size_t n = 0; n < plan.nodes.size(); ++n) {
    CHECK(doc["nodes"][n]["env"].get<std::map<std::string, std::string>>() == plan.nodes[n].env);
    for (std::size_t w = 0; w < plan.nodes[n].workers.size(); ++w) {
      const json& env = doc["nodes"][n]["workers"][w]["env"];
      CHECK(env.get<std::map<std::string, std::string>>() == WorkerOwnEnvironment(plan.nodes[n].workers[w]));
    }
  }
}

TEST_CASE("FormatPlanJson replaces invalid UTF-8 instead of throwing") {
  LaunchPlan plan = SamplePlan();
  plan.nodes[0].workers[0].argv.push_back(std::string("\xff\xfe"));
  std::string text = FormatPlanJson(plan);
  json doc = json::parse(text, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  CHECK(doc["nodes"][0]["workers"][0]["argv"].back() == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("FormatPlanTable shows the job once and one row per worker") {
  std::string table = FormatPlanTable(SamplePlan());
  CHECK(table.find("job j1  generation 2  world size 3  nodes 2\n") == 0);
  CHECK(table.find("master worker-0:29500  store 10.0.0.9:41000\n") != std::string::npos);
  CHECK(Count(table, "master ") == 1);
  CHECK(table.find("node  host          slots  rank  local  argv\n") != std::string::npos);
  CHECK(table.find("0     worker-0      0,1    0     0      python3 -u train.py --local_rank=0 "
                   "--name 'my run'\n") != std::string::npos);
  CHECK(table.find("                           1     1      python3 -u train.py --local_rank=1 "
                   "--name 'my run'\n") != std::string::npos);
  CHECK(table.find("1     bob@worker-1  3      2     0      python3") != std::string::npos);
  CHECK(table.find("store 10.0.0.9:41000\nenv NCCL_DEBUG=INFO\nnode  host") != std::string::npos);
  CHECK(Count(table, "\n") == 2 + 1 + 1 + 3);
}

TEST_CASE("FormatPlanTable lists the exported variables once, sorted, quoted and redacted") {
  PlanOptions options;
  options.program = {ProgramKind::kExecutable, "/bin/true", {}, true, "python3"};
  options.extra_env = {{"NCCL_DEBUG", "INFO"},
                       {"HF_TOKEN", "hf_very_secret"},
                       {"MSG", "it's here"},
                       {"WANDB_API_KEY", "k-123"}};
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", {0, 1}}, {"", "b", {0}}}, options);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  std::string table = FormatPlanTable(*plan);
  CHECK(table.find("env HF_TOKEN=<redacted>\n"
                   "env 'MSG=it'\\''s here'\n"
                   "env NCCL_DEBUG=INFO\n"
                   "env WANDB_API_KEY=<redacted>\n"
                   "node  host") != std::string::npos);
  CHECK(table.find("hf_very_secret") == std::string::npos);
  CHECK(table.find("k-123") == std::string::npos);
  // Contract variables are not repeated as env lines.
  CHECK(table.find("env RANK") == std::string::npos);
  CHECK(Count(table, "env ") == 4);
}

TEST_CASE("FormatPlanJson redacts the values of secret-looking variables") {
  PlanOptions options;
  options.program = {ProgramKind::kExecutable, "/bin/true", {}, true, "python3"};
  options.extra_env = {{"NCCL_DEBUG", "INFO"}, {"HF_TOKEN", "hf_very_secret"},
                       {"MLFLOW_TRACKING_PASSWORD", "pw-456"}};
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", {0, 1}}}, options);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  std::string text = FormatPlanJson(*plan);
  CHECK(text.find("hf_very_secret") == std::string::npos);
  CHECK(text.find("pw-456") == std::string::npos);
  json doc = json::parse(text, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  const json& node_env = doc["nodes"][0]["env"];
  CHECK(node_env["HF_TOKEN"] == "<redacted>");
  CHECK(node_env["MLFLOW_TRACKING_PASSWORD"] == "<redacted>");
  CHECK(node_env["NCCL_DEBUG"] == "INFO");
  for (const json& worker : doc["nodes"][0]["workers"]) {
    CHECK(worker["env"]["RANK"] == std::to_string(worker["rank"].get<int>()));
  }
  // The plan itself keeps the real values: only the printed form is redacted.
  CHECK(plan->nodes[0].env.at("HF_TOKEN") == "hf_very_secret");
}

TEST_CASE("The dry-run forms hide the password of a URL in an exported variable") {
  PlanOptions options;
  options.program = {ProgramKind::kExecutable, "/bin/true", {}, true, "python3"};
  options.extra_env = {{"MLFLOW_TRACKING_URI", "https://bob:pass@mlflow.example.com/x"}};
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", {0}}}, options);
  REQUIRE(plan.ok());
  std::string table = FormatPlanTable(*plan);
  CHECK(table.find("env 'MLFLOW_TRACKING_URI=https://bob:***@mlflow.example.com/x'\n") != std::string::npos);
  std::string text = FormatPlanJson(*plan);
  CHECK(text.find("pass") == std::string::npos);
  json doc = json::parse(text, nullptr, false);
  CHECK(doc["nodes"][0]["env"]["MLFLOW_TRACKING_URI"] == "https://bob:***@mlflow.example.com/x");
  // The workers get the real value.
  CHECK(plan->nodes[0].env.at("MLFLOW_TRACKING_URI") == "https://bob:pass@mlflow.example.com/x");
}

TEST_CASE("SlotRanges writes runs of slot ids as ranges") {
  CHECK(SlotRanges({}).empty());
  CHECK(SlotRanges({3}) == "3");
  CHECK(SlotRanges({0, 1}) == "0,1");
  CHECK(SlotRanges({0, 1, 2, 3}) == "0-3");
  CHECK(SlotRanges({0, 1, 2, 3, 6, 8, 9, 10}) == "0-3,6,8-10");
}

TEST_CASE("FormatPlanTable does not pad every row to a long slot list") {
  PlanOptions options;
  options.program = {ProgramKind::kExecutable, "/bin/true", {}, true, "python3"};
  std::vector<int> even;
  for (int i = 0; i < 64; i += 2) even.push_back(i);
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", even}}, options);
  REQUIRE(plan.ok());
  std::string table = FormatPlanTable(*plan);
  // The slots cell of the first row is longer than kMaxPaddedCellWidth: it pushes its own row to
  // the right, and the other rows keep the header's column widths.
  CHECK(table.find("\n0     a     " + SlotRanges(even) + "  0     0      /bin/true\n") != std::string::npos);
  CHECK(table.find("\n                   1     1      /bin/true\n") != std::string::npos);
  CHECK(table.size() < 2000);
}

TEST_CASE("FormatPlanTable prints no env line without exports or workers") {
  LaunchPlan plan;
  CHECK(FormatPlanTable(plan).find("env ") == std::string::npos);
  plan.nodes.push_back(NodePlan{0, "", "a", {0}, {}});
  CHECK(FormatPlanTable(plan).find("env ") == std::string::npos);
}

TEST_CASE("FormatPlanTable marks missing job fields with a dash") {
  LaunchPlan plan;
  plan.master_port = 1;
  std::string table = FormatPlanTable(plan);
  CHECK(table.find("job -  generation 0  world size 0  nodes 0\n") == 0);
  CHECK(table.find("master -:1  store -\n") != std::string::npos);
}

TEST_CASE("ShellJoin quotes only words that need it") {
  struct Case {
    std::vector<std::string> argv;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{"python3", "-u", "train.py", "--lr=3e-4"}, "python3 -u train.py --lr=3e-4"},
      {{"echo", "a b"}, "echo 'a b'"},
      {{"it's"}, "'it'\\''s'"},
      {{""}, "''"},
      {{"$HOME", "a*", "x;y", "~", "`id`"}, "'$HOME' 'a*' 'x;y' '~' '`id`'"},
      {{"=cmd"}, "'=cmd'"},
      {{"user@host:/a,b+c%d"}, "user@host:/a,b+c%d"},
      {{}, ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.want);
    CHECK(ShellJoin(c.argv) == c.want);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
