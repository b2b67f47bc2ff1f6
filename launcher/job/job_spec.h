// What a job is, as the launcher's program hands it to JobRunner (job_runner.h): its candidate
// nodes, how each generation's plan is made, the restart policy; and in node mode the join
// phase's bounds (join_phase.h reads them too).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/elastic/elastic_policy.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/plan/model_grid.h"
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

// What the job is: every candidate node, how each generation's plan is made, the restart policy.
struct JobSpec {
  // Every selected node, in order: candidate i is the agent's node id (Register.node_rank).
  Resources candidates;
  // The plan of generation 0 on every candidate, which checked the options (main.cc): its nodes
  // are what starting and probing an agent need (host, user, slots).
  LaunchPlan everyone;
  // The plan options of generation 0 (store address filled in); generation, restart reason and
  // fault time are set for each generation.
  PlanOptions plan_options;
  ElasticOptions elastic;
  // A train.json job's pipeline and tensor sizes, read once (main.cc): each generation's plan
  // gets its grid over its world from them (SetModelGrid), for the status page's coordinates.
  // Unset for other programs.
  std::optional<Result<ModelGridSizes>> model_grid;
  // Makes a starter for re-probing failed nodes on a thread of its own (nullptr: failed nodes are
  // never re-probed). A separate starter, so that a probe never shares state with Start().
  std::function<std::unique_ptr<AgentStarter>()> probe_starter;
};

// Node mode (docs/node-mode.md): the job's nodes are not known in advance; they join at the
// endpoint, and the membership makes the candidates.
struct NodeModeSpec {
  // plan_options, elastic.max_restarts and probe_starter (none) as for Run(); candidates,
  // everyone, elastic.min_nodes and elastic.max_nodes are filled in when the membership is complete.
  JobSpec job;
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::seconds join_timeout{0};
  std::chrono::seconds last_call_timeout{0};
  // This node, which hosts the endpoint: node 0, its agent started when the membership is complete.
  std::string own_host;
  int own_slots = 1;
};

}  // namespace dslaunch::launcher
