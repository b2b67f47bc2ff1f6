#include "launcher/slurm/allocation.h"

#include <charconv>

#include "launcher/slurm/hostlist.h"

namespace dslaunch::launcher {
namespace {

const std::string* Find(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

Status BadVariable(const char* name, const std::string& value, const std::string& what) {
  return InvalidArgumentError(std::string(name) + "='" + value + "': " + what +
                              " (is this process inside a Slurm allocation, or was the variable set by hand?)");
}

// An integer >= `min` from the variable `name`, when set.
Result<std::optional<int>> Count(const std::map<std::string, std::string>& env, const char* name, int min) {
  const std::string* value = Find(env, name);
  if (value == nullptr) return std::optional<int>();
  int n = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (ec != std::errc() || end != value->data() + value->size() || n < min) {
    return BadVariable(name, *value, "expected an integer >= " + std::to_string(min));
  }
  return std::optional<int>(n);
}

// Per-node counts ("2(x3),1") of the variable `name`, one per node, when set.
Result<std::vector<int>> PerNode(const std::map<std::string, std::string>& env, const char* name, size_t nodes) {
  const std::string* value = Find(env, name);
  if (value == nullptr) return std::vector<int>();
  auto counts = ExpandTasksPerNode(*value);
  if (!counts.ok()) return BadVariable(name, *value, counts.status().message());
  if (counts->size() != nodes) {
    return BadVariable(name, *value, "lists " + std::to_string(counts->size()) + " nodes, SLURM_JOB_NODELIST " +
                                         std::to_string(nodes));
  }
  return counts;
}

}  // namespace

Result<std::optional<SlurmAllocation>> ReadSlurmAllocation(const std::map<std::string, std::string>& env) {
  const std::string* job_id = Find(env, "SLURM_JOB_ID");
  if (job_id == nullptr) return std::optional<SlurmAllocation>();
  SlurmAllocation a;
  a.job_id = *job_id;
  // SLURM_NODELIST is the older name Slurm still sets beside it.
  const std::string* nodelist = Find(env, "SLURM_JOB_NODELIST");
  const char* nodelist_name = "SLURM_JOB_NODELIST";
  if (nodelist == nullptr) {
    nodelist = Find(env, "SLURM_NODELIST");
    nodelist_name = "SLURM_NODELIST";
  }
  if (nodelist == nullptr) {
    return InvalidArgumentError("SLURM_JOB_ID is set (" + *job_id +
                                ") but SLURM_JOB_NODELIST is not: dslaunch cannot tell the allocation's nodes; run "
                                "it inside salloc or sbatch, or give --hostfile");
  }
  auto nodes = ExpandHostlist(*nodelist);
  if (!nodes.ok()) return BadVariable(nodelist_name, *nodelist, nodes.status().message());
  if (nodes->empty()) return BadVariable(nodelist_name, *nodelist, "names no node");
  a.nodes = std::move(*nodes);
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<int> gpus, Count(env, "SLURM_GPUS_ON_NODE", 0));
  if (gpus && *gpus > 0) a.gpus_on_node = gpus;
  DSLAUNCH_ASSIGN_OR_RETURN(a.ntasks_per_node, Count(env, "SLURM_NTASKS_PER_NODE", 1));
  DSLAUNCH_ASSIGN_OR_RETURN(a.tasks_per_node, PerNode(env, "SLURM_TASKS_PER_NODE", a.nodes.size()));
  DSLAUNCH_ASSIGN_OR_RETURN(a.cpus_per_node, PerNode(env, "SLURM_JOB_CPUS_PER_NODE", a.nodes.size()));
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<int> restarts, Count(env, "SLURM_RESTART_COUNT", 0));
  a.restart_count = restarts.value_or(0);
  return std::optional<SlurmAllocation>(std::move(a));
}

Hostfile AllocationHostfile(const SlurmAllocation& allocation, std::optional<int> nproc_per_node,
                            std::string* slots_source) {
  Hostfile h;
  h.path = "SLURM_JOB_NODELIST";
  std::string source;
  for (size_t i = 0; i < allocation.nodes.size(); ++i) {
    HostEntry e;
    e.host = allocation.nodes[i];
    if (nproc_per_node) {
      e.slots = *nproc_per_node;
      source = "--nproc_per_node";
    } else if (allocation.gpus_on_node) {
      e.slots = *allocation.gpus_on_node;
      source = "SLURM_GPUS_ON_NODE";
    } else if (allocation.ntasks_per_node) {
      e.slots = *allocation.ntasks_per_node;
      source = "SLURM_NTASKS_PER_NODE";
    } else if (!allocation.tasks_per_node.empty()) {
      e.slots = allocation.tasks_per_node[i];
      source = "SLURM_TASKS_PER_NODE";
    } else {
      e.slots = 1;
      source = "the default of 1 (no SLURM_TASKS_PER_NODE)";
    }
    h.hosts.push_back(std::move(e));
  }
  if (slots_source != nullptr) *slots_source = source;
  return h;
}

const char* LauncherName(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::kLocal: return "local";
    case LauncherKind::kSsh: return "ssh";
    case LauncherKind::kSlurm: return "slurm";
  }
  return "?";
}

Result<LauncherKind> ParseLauncherKind(const std::string& value) {
  for (LauncherKind k : {LauncherKind::kLocal, LauncherKind::kSsh, LauncherKind::kSlurm}) {
    if (value == LauncherName(k)) return k;
  }
  return InvalidArgumentError("--launcher '" + value + "': expected slurm, ssh or local");
}

Result<LauncherChoice> ChooseLauncher(const LauncherInputs& in) {
  LauncherChoice c;
  const SlurmAllocation* a = in.allocation;
  if (in.requested == LauncherKind::kSlurm && a == nullptr) {
    return InvalidArgumentError(
        "--launcher slurm needs a Slurm allocation (SLURM_JOB_ID is not set): run dslaunch inside salloc or an "
        "sbatch script, or choose --launcher ssh with a --hostfile");
  }
  c.nodes_from_slurm = !in.hostfile_given && a != nullptr;
  const std::string nodes =
      a == nullptr ? std::string()
                   : std::to_string(a->nodes.size()) + (a->nodes.size() == 1 ? " node" : " nodes") +
                         " of Slurm job " + a->job_id;
  if (in.requested) {
    c.kind = *in.requested;
    c.why = "--launcher " + std::string(LauncherName(c.kind));
    if (c.nodes_from_slurm) c.why += ", " + nodes;
    return c;
  }
  if (in.hostfile_given) {
    // Decided by main as outside Slurm (ssh, or local for a local one-host file).
    c.kind = LauncherKind::kSsh;
    c.why = a == nullptr ? "--hostfile" : "--hostfile inside Slurm job " + a->job_id +
                                              " (its hosts, not the allocation's; --launcher slurm starts them with srun)";
    return c;
  }
  if (a == nullptr) {
    c.kind = LauncherKind::kLocal;
    c.why = "no --hostfile";
    return c;
  }
  if (a->nodes.size() == 1 && in.single_node_is_here) {
    c.kind = LauncherKind::kLocal;
    c.why = nodes + ", which is this machine";
    return c;
  }
  c.kind = LauncherKind::kSlurm;
  c.why = nodes;
  return c;
}

}  // namespace dslaunch::launcher
