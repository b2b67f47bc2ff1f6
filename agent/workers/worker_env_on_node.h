// The environment a worker process starts with, completed on its node by the agent.
//
// The launcher's plan carries the contract's variables (launcher/plan/env_contract.h); the agent adds
// what only the node knows: its own environment underneath, OMP_NUM_THREADS when nobody set it,
// and the path of the store secret file. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dslaunch::agent {

// OMP_NUM_THREADS for a worker when the user has not set it: the node's cores shared evenly by its
// workers, at least 1. Precondition: local_workers >= 1. `cores` <= 0 (unknown) gives 1.
int DefaultOmpThreads(int cores, int local_workers);

// What only the node knows about its workers' environment.
struct NodeFacts {
  int cores = 1;           // CPU cores available to the agent
  int local_workers = 1;   // workers on this node
  std::string secret_file;    // DSLAUNCH_STORE_SECRET_FILE
  // DSLAUNCH_STORE: the node's store proxy ("unix:PATH") or, without one, the endpoint as this
  // node reaches it (the agent's --endpoint).
  std::string store_address;
  std::string job_dir;        // DSLAUNCH_JOB_DIR: the job's log directory on this node
  // The interface of this node's route to MASTER_ADDR ("eth0", "lo"); empty if unknown.
  std::string master_interface;
  // --bind_cores_to_rank: the number of cores of this worker's own set (OMP_NUM_THREADS's value
  // unless the user set one); 0: not bound, the node's cores are shared (DefaultOmpThreads).
  int bound_cores = 0;
  // DSLAUNCH_LAUNCHER_ADDRESS: the endpoint as this node reaches it, whatever DSLAUNCH_STORE is
  // (the route the job's traffic takes: the runtime picks Gloo's interface from it).
  std::string launcher_address;
};

// "NAME=VALUE" strings, sorted by name: `base` (the agent's environment), overlaid with
// `node_planned` (the plan's variables for every worker of the node), then with `worker_planned`
// (the worker's own: RANK, LOCAL_RANK), then OMP_NUM_THREADS if none set it (node.bound_cores
// when bound, else DefaultOmpThreads(...)), then DSLAUNCH_STORE (the node's store proxy, or the
// address this node reached the launcher at: the plan cannot know which of the launcher's
// addresses each node can reach), DSLAUNCH_LAUNCHER_ADDRESS and DSLAUNCH_STORE_SECRET_FILE; and,
// each unless set by then, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME =
// node.master_interface (when known), and TORCH_NCCL_ASYNC_ERROR_HANDLING = 1 with its older name
// NCCL_ASYNC_ERROR_HANDLING = 1 (neither when either is set).
// DSLAUNCH_JOB_SECRET is removed, wherever it came from: a worker never sees the secret itself.
std::vector<std::string> CompleteWorkerEnvironment(const std::map<std::string, std::string>& base,
                                                   const std::map<std::string, std::string>& node_planned,
                                                   const std::map<std::string, std::string>& worker_planned,
                                                   const NodeFacts& node);

}  // namespace dslaunch::agent
