// The worker environment contract as pure functions: which variables a worker gets, with which
// values. The names live in common/env_names.h; the table is in docs/launch-plan.md.
//
// A plan holds each node's variables once (NodeEnvironment) and each worker's own ones
// (RankEnvironment), so that its size is linear in the number of ranks: a node's
// CUDA_VISIBLE_DEVICES alone is as long as its slot list.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/plan/launch_plan.h"

namespace dslaunch::launcher {

// The variables every worker of `node` gets: `extra_env` first, then the contract's node-wide
// variables (WORLD_SIZE, LOCAL_WORLD_SIZE, LOCAL_SIZE, NODE_RANK, GROUP_RANK, CROSS_RANK, NNODES,
// GROUP_WORLD_SIZE, CROSS_SIZE, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES, DSLAUNCH_STORE,
// DSLAUNCH_JOB_ID, DSLAUNCH_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
// TORCHELASTIC_RUN_ID, ROLE_WORLD_SIZE, ROLE_NAME; at generation > 0 DSLAUNCH_RESTART_REASON and
// DSLAUNCH_FAULT_TIME_MS), which win over `extra_env` on a name conflict. CUDA_VISIBLE_DEVICES is JoinSlots(node.slots), or "" when plan.no_devices.
// Reads plan.world_size, plan.nodes.size(), plan.master_addr/master_port, plan.store_address,
// plan.job_id, plan.generation, plan.max_restarts, plan.restart_reason, plan.fault_time_ms,
// plan.no_devices, plan.role_name; node.node_rank, node.slots, node.workers.size()
// (the local world size, so the node's workers must be in place). Ignores node.env. Does not add
// OMP_NUM_THREADS or the store credential: the agent adds those.
std::map<std::string, std::string> NodeEnvironment(const LaunchPlan& plan, const NodePlan& node,
                                                   const std::map<std::string, std::string>& extra_env);

// The variables that differ between the workers of a node: RANK, ROLE_RANK and LOCAL_RANK.
std::map<std::string, std::string> RankEnvironment(const WorkerPlan& worker);

// The whole contract for one worker: NodeEnvironment overlaid with RankEnvironment (computed, not
// read from node.env / worker.env).
std::map<std::string, std::string> WorkerEnvironment(
    const LaunchPlan& plan, const NodePlan& node, const WorkerPlan& worker,
    const std::map<std::string, std::string>& extra_env);

// A planned worker's own variables, what its ASSIGNMENT carries besides its node's: RankEnvironment
// overlaid with worker.env. Computed when needed, not kept in the plan (a map per rank is ~300 B
// at 100k ranks; issue 16).
std::map<std::string, std::string> WorkerOwnEnvironment(const WorkerPlan& worker);

// A planned worker's whole environment: node.env overlaid with WorkerOwnEnvironment. For tests and tools;
// the launcher sends the two parts separately (docs/protocol.md, ASSIGNMENT).
std::map<std::string, std::string> PlannedEnvironment(const NodePlan& node, const WorkerPlan& worker);

// "0,2,3": the value of CUDA_VISIBLE_DEVICES for a node with these slots ("" for none).
std::string JoinSlots(const std::vector<int>& slots);

}  // namespace dslaunch::launcher
