// LaunchPlan: who runs what, where, with which ranks and environment. Pure data, computed by
// PlanLaunch from the selected resources and the launch options; printed by `--dry-run`.
// The JSON form is specified in docs/launch-plan.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/process_grid.h"
#include "common/status.h"
#include "launcher/plan/resource_filter.h"

namespace dslaunch::launcher {

// How a worker's argv is formed from PROGRAM and ARGS.
enum class ProgramKind {
  kPythonScript,  // PROGRAM ends in .py: python3 -u PROGRAM [--local_rank=N] ARGS...
  kPythonModule,  // -m/--module: python3 -u -m PROGRAM [--local_rank=N] ARGS...
  kExecutable,    // --no_python, or any other PROGRAM: PROGRAM ARGS...
  kTrainConfig,   // PROGRAM ends in .json: the bundled runtime, WORKER train PROGRAM ARGS...
};

struct ProgramSpec {
  ProgramKind kind = ProgramKind::kExecutable;
  std::string program;             // as given on the command line
  std::vector<std::string> args;   // passed through untouched
  bool local_rank_arg = true;      // append --local_rank=N for Python programs (DeepSpeed style)
  std::string python = "python3";  // interpreter for Python programs
  std::string worker = "dslaunch-worker";  // the bundled runtime, for kTrainConfig
};

struct WorkerPlan {
  int rank = 0;        // global rank
  int local_rank = 0;  // index on its node
  std::vector<std::string> argv;
  // Variables of this worker beyond the contract's own (PlanLaunch sets none). Its RANK,
  // ROLE_RANK and LOCAL_RANK are computed from rank and local_rank when needed
  // (WorkerOwnEnvironment in env_contract.h), not kept per rank; its whole planned environment is
  // its node's `env` overlaid with those (PlannedEnvironment).
  std::map<std::string, std::string> env;
};

struct NodePlan {
  int node_rank = 0;
  std::string user;        // empty: the current user
  std::string host;        // as written in the hostfile ("localhost" for a local job)
  std::vector<int> slots;  // selected slot ids; CUDA_VISIBLE_DEVICES on this node
  std::vector<WorkerPlan> workers;
  // What every worker of this node gets (NodeEnvironment in env_contract.h): the exports and the
  // contract's node-wide variables (WORLD_SIZE, ..., CUDA_VISIBLE_DEVICES), without the parts the
  // agent adds (OMP_NUM_THREADS default, the store secret file). Built once per node, not per
  // rank, so that a plan's size is linear in its number of ranks. Sorted by name.
  std::map<std::string, std::string> env;
};

// torchrun's role name unless --role gives another: dslaunch runs one role per job.
inline constexpr char kRoleNameDefault[] = "default";

// What the plan carries to every node as the options gave it: the job, its generation and the
// settings every worker's environment states. Declared once: PlanOptions and LaunchPlan are both
// made of it, and PlanLaunch hands it over whole.
struct PlanFacts {
  std::string job_id;
  int generation = 0;  // restart count
  int max_restarts = 0;  // --max_restarts (TORCHELASTIC_MAX_RESTARTS)
  // Generation > 0: why the previous one ended and when its fault was detected (Unix ms; 0: none).
  std::string restart_reason;
  int64_t fault_time_ms = 0;
  int64_t watchdog_timeout_ms = 0;  // --watchdog_timeout (DSLAUNCH_WATCHDOG_TIMEOUT); 0: none
  int master_port = 29500;
  std::string store_address;  // host:port of the launcher's endpoint (DSLAUNCH_STORE)
  // The launcher's CUDA_VISIBLE_DEVICES was set and empty: every worker gets an empty
  // CUDA_VISIBLE_DEVICES (no device) instead of its node's slots.
  bool no_devices = false;
  // --bind_cores_to_rank and --bind_core_list (docs/launch-plan.md, "Core binding"): each node's
  // agent splits bind_core_list (empty: its own CPU affinity) between its local ranks.
  bool bind_cores_to_rank = false;
  std::vector<int> bind_core_list;
  std::string role_name = kRoleNameDefault;  // --role: every worker's ROLE_NAME
};

struct LaunchPlan : PlanFacts {
  int world_size = 0;
  std::string master_addr;  // resolved: never empty
  std::vector<NodePlan> nodes;
  // A train.json that splits its model (pipeline stages, tensor ranks: docs/parallelism.md): the
  // process grid of the world, from which the printed plan gives each rank's coordinates
  // (SetModelGrid, launcher/plan/model_grid.h). Or why it could not be made. Both empty otherwise.
  std::optional<ProcessGrid> grid;
  std::string grid_error;
};

struct PlanOptions : PlanFacts {
  ProgramSpec program;
  std::string master_addr;  // empty: the first selected host (127.0.0.1 when it is local)
  // Extra variables given to every worker (exports); the contract's variables win on conflict.
  std::map<std::string, std::string> extra_env;
};

// How PROGRAM runs, from the CLI flags (docs/launch-plan.md, "Program classification"):
// --no_python gives kExecutable (it wins over --module; the CLI should reject that pair, as
// DeepSpeed does); else --module gives kPythonModule; else a PROGRAM ending in ".py" gives
// kPythonScript; a PROGRAM ending in ".json" is a train.json for the bundled runtime
// (kTrainConfig); anything else is run directly (kExecutable).
ProgramKind ClassifyProgram(std::string_view program, bool no_python, bool module);

// The local rank of global `rank` among `node`'s workers; -1 when it is not one of them. O(1): a
// node's workers have consecutive global ranks in local-rank order (PlanLaunch).
int LocalRankOf(const NodePlan& node, int rank);

// The argv of the worker with this local rank: see ProgramKind. --local_rank=N goes right after the
// script or module name, before the user's ARGS (as DeepSpeed's launch.py does), and only for the
// Python kinds when program.local_rank_arg is set; executables learn it from LOCAL_RANK.
std::vector<std::string> WorkerArgv(const ProgramSpec& program, int local_rank);

// Builds the plan: nodes in resource order get node ranks 0..N-1, workers get consecutive global
// ranks node by node (node 0's local ranks first); local rank i runs on the node's i-th slot.
// Each worker's argv is WorkerArgv(...); each node's env is NodeEnvironment(...) (env_contract.h);
// a worker's own variables are computed when sent (WorkerOwnEnvironment). Time and memory are linear in the number of
// ranks (plus the exports once per node).
// An empty master_addr becomes the first node's host, or 127.0.0.1 when that host is "localhost".
// Fails with kInvalidArgument when no slot is selected or an option is out of range (port outside
// 1..65535, empty program or python, negative generation, a node with no host, a negative or
// repeated slot id, an extra_env name that is empty or holds '=' or NUL, a bind_core_list without
// bind_cores_to_rank or with fewer cores than a node has ranks).
Result<LaunchPlan> PlanLaunch(const Resources& resources, const PlanOptions& options);

}  // namespace dslaunch::launcher
