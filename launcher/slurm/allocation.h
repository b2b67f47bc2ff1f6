// A Slurm allocation as the launcher sees it from inside (salloc, sbatch): which nodes, how many
// workers per node, how often the job was requeued; and which launcher (local, SSH, srun) starts
// the agents. Pure: the environment comes in as a map, read once at the edge (main.cc). The rules
// are specified in docs/slurm.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/hostfile.h"

namespace dslaunch::launcher {

// What Slurm told this process about its allocation (sbatch(1), salloc(1), "OUTPUT ENVIRONMENT
// VARIABLES").
struct SlurmAllocation {
  std::string job_id;               // SLURM_JOB_ID
  std::vector<std::string> nodes;   // SLURM_JOB_NODELIST, expanded, in Slurm's order
  std::optional<int> gpus_on_node;  // SLURM_GPUS_ON_NODE
  std::optional<int> ntasks_per_node;  // SLURM_NTASKS_PER_NODE (set only for --ntasks-per-node)
  std::vector<int> tasks_per_node;  // SLURM_TASKS_PER_NODE, one count per node; empty when unset
  std::vector<int> cpus_per_node;   // SLURM_JOB_CPUS_PER_NODE, one count per node; empty when unset
  int restart_count = 0;            // SLURM_RESTART_COUNT: times the job was requeued
};

// nullopt when SLURM_JOB_ID is unset or empty (not inside an allocation). Otherwise the allocation,
// or kInvalidArgument naming the variable and its value: SLURM_JOB_NODELIST missing or not a
// hostlist expression; a count that is not an integer >= 1 (SLURM_RESTART_COUNT: >= 0); a
// SLURM_TASKS_PER_NODE or SLURM_JOB_CPUS_PER_NODE that lists a different number of nodes than
// SLURM_JOB_NODELIST.
Result<std::optional<SlurmAllocation>> ReadSlurmAllocation(const std::map<std::string, std::string>& env);

// The allocation as a hostfile: one entry per node, named as Slurm names it, with its slots from
// `nproc_per_node` (--nproc_per_node), else SLURM_GPUS_ON_NODE, else SLURM_NTASKS_PER_NODE, else
// that node's SLURM_TASKS_PER_NODE count, else 1. Hostfile::path names the source for messages
// ("SLURM_JOB_NODELIST"). `slots_source` (optional) receives where the slots came from, for the
// launcher's one line: "--nproc_per_node", "SLURM_GPUS_ON_NODE", ...
Hostfile AllocationHostfile(const SlurmAllocation& allocation, std::optional<int> nproc_per_node,
                            std::string* slots_source = nullptr);

// How agents start (--launcher).
enum class LauncherKind { kLocal, kSsh, kSlurm };

// "local", "ssh", "slurm".
const char* LauncherName(LauncherKind kind);
// Parses --launcher's value; kInvalidArgument naming the value and the choices.
Result<LauncherKind> ParseLauncherKind(const std::string& value);

struct LauncherChoice {
  LauncherKind kind = LauncherKind::kLocal;
  bool nodes_from_slurm = false;  // the job's nodes are the allocation's (no hostfile)
  std::string why;                // the reason, for the one line the launcher prints
};

// What ChooseLauncher needs to know.
struct LauncherInputs {
  std::optional<LauncherKind> requested;  // --launcher; absent: automatic
  bool hostfile_given = false;            // --hostfile
  const SlurmAllocation* allocation = nullptr;  // inside an allocation; not owned
  // The allocation's only node is the machine the launcher runs on (sbatch -N1).
  bool single_node_is_here = false;
};

// The launcher and where the nodes come from (docs/slurm.md, "Which launcher"):
//   --launcher given: that one; slurm needs an allocation (kInvalidArgument otherwise); local
//     needs no hostfile or a local one (checked later, as before);
//   a hostfile given: its hosts, over SSH (or locally for a local one-host file), as outside Slurm;
//     `--launcher slurm` starts the hostfile's hosts with srun instead (they must be in the
//     allocation);
//   inside an allocation without a hostfile: its nodes, started with srun; a one-node allocation
//     whose node is this machine is started locally (srun would add a step and nothing else);
//   otherwise: local, as before.
Result<LauncherChoice> ChooseLauncher(const LauncherInputs& inputs);

}  // namespace dslaunch::launcher
