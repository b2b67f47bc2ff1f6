// WorkerIdentity: what a worker learns about itself from the environment contract
// (docs/launch-plan.md). Parsing is pure: the caller reads the environment once, at its edge,
// and passes it in as a map.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace dslaunch {

struct WorkerIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  int generation = 0;  // DSLAUNCH_RESTART_COUNT
  std::string job_id;
  std::string store_address;      // DSLAUNCH_STORE: host:port, or unix:PATH (the node's store proxy)
  // DSLAUNCH_LAUNCHER_ADDRESS (host:port), else DSLAUNCH_STORE: the route to the launcher.
  std::string launcher_address;
  std::string store_secret_file;  // DSLAUNCH_STORE_SECRET_FILE
};

// Reads the contract's variables. A missing or malformed variable is kInvalidArgument naming it
// ("RANK='x' is not an integer"); ranks out of range (RANK >= WORLD_SIZE, ...) are errors too.
Result<WorkerIdentity> ParseWorkerIdentity(const std::map<std::string, std::string>& env);

}  // namespace dslaunch
