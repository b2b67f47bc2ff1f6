#include "launcher/plan/env_contract.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

using Env = std::map<std::string, std::string>;

// Two nodes: worker-0 with slots 0,1 (ranks 0,1), worker-1 with slots 2,3,5 (ranks 2..4).
LaunchPlan TwoNodePlan() {
  LaunchPlan plan;
  plan.job_id = "j42";
  plan.generation = 3;
  plan.max_restarts = 4;
  plan.restart_reason = "rank 1 exited with code 1";
  plan.fault_time_ms = 1763900000123;
  plan.watchdog_timeout_ms = 2500;
  plan.world_size = 5;
  plan.master_addr = "10.0.0.1";
  plan.master_port = 29500;
  plan.store_address = "10.0.0.9:41000";
  plan.nodes = {NodePlan{0, "", "worker-0", {0, 1}, {{0, 0, {}, {}}, {1, 1, {}, {}}}},
                NodePlan{1, "", "worker-1", {2, 3, 5}, {{2, 0, {}, {}}, {3, 1, {}, {}}, {4, 2, {}, {}}}}};
  return plan;
}

TEST_CASE("WorkerEnvironment sets every variable of the contract") {
  LaunchPlan plan = TwoNodePlan();
  const NodePlan& node = plan.nodes[1];
  Env env = WorkerEnvironment(plan, node, node.workers[1], {});
  const Env want = {
      {"RANK", "3"},
      {"WORLD_SIZE", "5"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "3"},
      {"LOCAL_SIZE", "3"},
      {"NODE_RANK", "1"},
      {"GROUP_RANK", "1"},
      {"CROSS_RANK", "1"},
      {"NNODES", "2"},
      {"GROUP_WORLD_SIZE", "2"},
      {"CROSS_SIZE", "2"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"CUDA_VISIBLE_DEVICES", "2,3,5"},
      {"DSLAUNCH_STORE", "10.0.0.9:41000"},
      {"DSLAUNCH_JOB_ID", "j42"},
      {"DSLAUNCH_RESTART_COUNT", "3"},
      {"TORCHELASTIC_RESTART_COUNT", "3"},
      {"TORCHELASTIC_MAX_RESTARTS", "4"},
      {"TORCHELASTIC_RUN_ID", "j42"},
      {"ROLE_RANK", "3"},
      {"ROLE_WORLD_SIZE", "5"},
      {"ROLE_NAME", "default"},
      {"DSLAUNCH_RESTART_REASON", "rank 1 exited with code 1"},
      {"DSLAUNCH_FAULT_TIME_MS", "1763900000123"},
      {"DSLAUNCH_WATCHDOG_TIMEOUT", "2.5"},
  };
  CHECK(env == want);
}

TEST_CASE("WorkerEnvironment gives every worker the plan's role name as ROLE_NAME (torchrun's --role)") {
  LaunchPlan plan = TwoNodePlan();
  plan.role_name = "trainer";
  for (const NodePlan& node : plan.nodes) {
    for (const WorkerPlan& worker : node.workers) {
      CHECK(WorkerEnvironment(plan, node, worker, {{"ROLE_NAME", "from-export"}}).at("ROLE_NAME") == "trainer");
    }
  }
}

TEST_CASE("WorkerEnvironment of generation 0 has no restart reason, even one the launcher inherited") {
  LaunchPlan plan = TwoNodePlan();
  plan.generation = 0;
  const NodePlan& node = plan.nodes[0];
  Env env = WorkerEnvironment(plan, node, node.workers[0],
                              {{"DSLAUNCH_RESTART_REASON", "old"}, {"DSLAUNCH_FAULT_TIME_MS", "1"}});
  CHECK(env.count("DSLAUNCH_RESTART_REASON") == 0);
  CHECK(env.count("DSLAUNCH_FAULT_TIME_MS") == 0);
  CHECK(env.at("DSLAUNCH_RESTART_COUNT") == "0");
}

TEST_CASE("WorkerEnvironment passes extra variables through and lets the contract win") {
  LaunchPlan plan = TwoNodePlan();
  const NodePlan& node = plan.nodes[0];
  Env extra = {{"NCCL_DEBUG", "INFO"}, {"RANK", "99"}, {"CUDA_VISIBLE_DEVICES", "7"},
               {"PYTHONPATH", "/src"}};
  Env env = WorkerEnvironment(plan, node, node.workers[0], extra);
  CHECK(env.at("NCCL_DEBUG") == "INFO");
  CHECK(env.at("PYTHONPATH") == "/src");
  CHECK(env.at("RANK") == "0");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(env.size() == 26 + 2);
}

TEST_CASE("NodeEnvironment and RankEnvironment split the contract between node and worker") {
  LaunchPlan plan = TwoNodePlan();
  NodePlan& node = plan.nodes[1];
  Env node_env = NodeEnvironment(plan, node, {{"NCCL_DEBUG", "INFO"}});
  CHECK(node_env.count("RANK") == 0);
  CHECK(node_env.count("LOCAL_RANK") == 0);
  CHECK(node_env.at("CUDA_VISIBLE_DEVICES") == "2,3,5");
  CHECK(node_env.at("NCCL_DEBUG") == "INFO");
  CHECK(node_env.size() == 23 + 1);
  CHECK(RankEnvironment(node.workers[2]) == Env{{"RANK", "4"}, {"ROLE_RANK", "4"}, {"LOCAL_RANK", "2"}});
  node.env = node_env;
  node.workers[2].env = RankEnvironment(node.workers[2]);
  CHECK(PlannedEnvironment(node, node.workers[2]) == WorkerEnvironment(plan, node, node.workers[2], {{"NCCL_DEBUG", "INFO"}}));
  plan.no_devices = true;
  CHECK(NodeEnvironment(plan, node, {}).at("CUDA_VISIBLE_DEVICES").empty());
}

TEST_CASE("WorkerEnvironment ignores the worker's previous env") {
  LaunchPlan plan = TwoNodePlan();
  NodePlan& node = plan.nodes[0];
  node.workers[0].env = {{"STALE", "1"}};
  CHECK(WorkerEnvironment(plan, node, node.workers[0], {}).count("STALE") == 0);
}

TEST_CASE("JoinSlots writes a comma list") {
  CHECK(JoinSlots({}).empty());
  CHECK(JoinSlots({0}) == "0");
  CHECK(JoinSlots({0, 2, 10}) == "0,2,10");
}

}  // namespace
}  // namespace dslaunch::launcher
