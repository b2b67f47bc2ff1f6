#include "launcher/plan/env_contract.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"
#include "common/env_names.h"

namespace dslaunch::launcher {
namespace {

// "3", "2.5", "0.125": milliseconds as decimal seconds, without trailing zeros.
std::string FormatDecimalSeconds(int64_t ms) {
  std::string out = std::to_string(ms / 1000);
  if (int64_t frac = ms % 1000; frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), ".%03lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> NodeEnvironment(const LaunchPlan& plan, const NodePlan& node,
                                                   const std::map<std::string, std::string>& extra_env) {
  std::map<std::string, std::string> vars = extra_env;
  auto set = [&vars](const char* name, std::string value) { vars[name] = std::move(value); };

  const std::string local_world_size = std::to_string(node.workers.size());
  const std::string node_rank = std::to_string(node.node_rank);
  const std::string nnodes = std::to_string(plan.nodes.size());
  const std::string restart_count = std::to_string(plan.generation);

  set(env::kWorldSize, std::to_string(plan.world_size));
  set(env::kLocalWorldSize, local_world_size);
  set(env::kLocalSize, local_world_size);
  set(env::kNodeRank, node_rank);
  set(env::kGroupRank, node_rank);
  set(env::kCrossRank, node_rank);
  set(env::kNumNodes, nnodes);
  set(env::kGroupWorldSize, nnodes);
  set(env::kCrossSize, nnodes);
  set(env::kMasterAddr, plan.master_addr);
  set(env::kMasterPort, std::to_string(plan.master_port));
  // Set on every node, GPU or not, as DeepSpeed does: on a CPU node it is harmless, and a worker
  // must never see the devices of slots that were excluded (nor any, when the launcher's own
  // CUDA_VISIBLE_DEVICES was empty).
  set(env::kCudaVisibleDevices, plan.no_devices ? std::string() : JoinSlots(node.slots));
  set(env::kStore, plan.store_address);
  set(env::kJobId, plan.job_id);
  set(env::kRestartCount, restart_count);
  set(env::kTorchElasticRestartCount, restart_count);
  set(env::kTorchElasticMaxRestarts, std::to_string(plan.max_restarts));
  set(env::kTorchElasticRunId, plan.job_id);
  set(env::kRoleWorldSize, std::to_string(plan.world_size));
  set(env::kRoleName, plan.role_name);
  if (plan.watchdog_timeout_ms > 0) {
    set(env::kWatchdogTimeout, FormatDecimalSeconds(plan.watchdog_timeout_ms));
  } else {
    vars.erase(env::kWatchdogTimeout);
  }
  if (plan.generation > 0) {
    set(env::kRestartReason, plan.restart_reason);
    if (plan.fault_time_ms > 0) set(env::kFaultTime, std::to_string(plan.fault_time_ms));
  } else {
    // Never inherited from the launcher's environment: they describe this job's own restarts.
    vars.erase(env::kRestartReason);
    vars.erase(env::kFaultTime);
  }
  return vars;
}

std::map<std::string, std::string> RankEnvironment(const WorkerPlan& worker) {
  const std::string rank = std::to_string(worker.rank);
  return {{env::kRank, rank}, {env::kRoleRank, rank}, {env::kLocalRank, std::to_string(worker.local_rank)}};
}

std::map<std::string, std::string> WorkerEnvironment(
    const LaunchPlan& plan, const NodePlan& node, const WorkerPlan& worker,
    const std::map<std::string, std::string>& extra_env) {
  std::map<std::string, std::string> vars = NodeEnvironment(plan, node, extra_env);
  for (auto& [name, value] : RankEnvironment(worker)) vars[name] = std::move(value);
  return vars;
}

std::map<std::string, std::string> WorkerOwnEnvironment(const WorkerPlan& worker) {
  std::map<std::string, std::string> vars = RankEnvironment(worker);
  for (const auto& [name, value] : worker.env) vars[name] = value;
  return vars;
}

std::map<std::string, std::string> PlannedEnvironment(const NodePlan& node, const WorkerPlan& worker) {
  std::map<std::string, std::string> vars = node.env;
  for (auto& [name, value] : WorkerOwnEnvironment(worker)) vars[name] = std::move(value);
  return vars;
}

std::string JoinSlots(const std::vector<int>& slots) {
  std::string joined;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i > 0) joined += ',';
    joined += std::to_string(slots[i]);
  }
  return joined;
}

}  // namespace dslaunch::launcher
