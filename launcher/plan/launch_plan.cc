#include "launcher/plan/launch_plan.h"

#include <set>
#include <utility>

#include "common/cpu_list.h"
#include "common/env_names.h"
#include "common/text.h"
#include "launcher/plan/env_contract.h"
#include "launcher/plan/hostfile.h"

namespace dslaunch::launcher {
namespace {

// Valid TCP ports for MASTER_PORT (0 would mean "any", which the workers cannot agree on).
constexpr int kMinPort = 1;
constexpr int kMaxPort = 65535;

// The loopback address MASTER_ADDR gets when the first node is "localhost": PyTorch's store binds
// to it directly, avoiding a name lookup that may return ::1 or the machine's LAN address.
constexpr char kLoopbackAddress[] = "127.0.0.1";

constexpr std::string_view kPythonSuffix = ".py";
constexpr std::string_view kTrainConfigSuffix = ".json";


Status ValidateOptions(const Resources& resources, const PlanOptions& options) {
  const ProgramSpec& program = options.program;
  if (program.program.empty()) return InvalidArgumentError("no program to launch (empty PROGRAM)");
  if (program.kind != ProgramKind::kExecutable && program.python.empty()) {
    return InvalidArgumentError("empty python interpreter for " + SingleQuoted(program.program));
  }
  if (options.master_port < kMinPort || options.master_port > kMaxPort) {
    return InvalidArgumentError("--master_port " + std::to_string(options.master_port) +
                                " is outside " + std::to_string(kMinPort) + ".." +
                                std::to_string(kMaxPort));
  }
  if (options.max_restarts < 0) {
    return InvalidArgumentError("negative max_restarts " + std::to_string(options.max_restarts));
  }
  if (options.generation < 0) {
    return InvalidArgumentError("negative generation " + std::to_string(options.generation));
  }
  for (const auto& [name, value] : options.extra_env) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return InvalidArgumentError("invalid environment variable " + SingleQuoted(name) +
                                  " (names must be non-empty without '=', no NUL anywhere)");
    }
  }
  if (resources.empty()) return InvalidArgumentError("no slot selected: nothing to launch");
  const std::string core_list = "--bind_core_list '" + FormatCpuList(options.bind_core_list) + "'";
  if (!options.bind_core_list.empty() && !options.bind_cores_to_rank) {
    return InvalidArgumentError(core_list + " needs --bind_cores_to_rank");
  }
  for (const NodeResources& node : resources) {
    if (node.host.empty()) return InvalidArgumentError("a selected node has an empty host name");
    if (!options.bind_core_list.empty() && options.bind_core_list.size() < node.slots.size()) {
      const size_t cores = options.bind_core_list.size();
      return InvalidArgumentError(core_list + " gives " + std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
                                  " but host " + SingleQuoted(node.host) + " runs " + std::to_string(node.slots.size()) +
                                  " local ranks; each rank needs at least one core: list more cores or run "
                                  "fewer ranks per node");
    }
    if (node.slots.empty()) {
      return InvalidArgumentError("host " + SingleQuoted(node.host) + " has no slot selected");
    }
    std::set<int> seen;
    for (int slot : node.slots) {
      if (slot < 0) {
        return InvalidArgumentError("host " + SingleQuoted(node.host) + ": negative slot id " +
                                    std::to_string(slot));
      }
      if (!seen.insert(slot).second) {
        return InvalidArgumentError("host " + SingleQuoted(node.host) + ": slot " + std::to_string(slot) +
                                    " selected twice");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int LocalRankOf(const NodePlan& node, int rank) {
  if (node.workers.empty()) return -1;
  const int index = rank - node.workers.front().rank;
  if (index < 0 || index >= static_cast<int>(node.workers.size())) return -1;
  return node.workers[static_cast<size_t>(index)].local_rank;
}

ProgramKind ClassifyProgram(std::string_view program, bool no_python, bool module) {
  if (no_python) return ProgramKind::kExecutable;
  if (module) return ProgramKind::kPythonModule;
  if (program.size() > kPythonSuffix.size() && program.ends_with(kPythonSuffix)) {
    return ProgramKind::kPythonScript;
  }
  if (program.size() > kTrainConfigSuffix.size() && program.ends_with(kTrainConfigSuffix)) {
    return ProgramKind::kTrainConfig;
  }
  return ProgramKind::kExecutable;
}

std::vector<std::string> WorkerArgv(const ProgramSpec& program, int local_rank) {
  std::vector<std::string> argv;
  switch (program.kind) {
    case ProgramKind::kPythonScript:
      argv = {program.python, "-u", program.program};
      break;
    case ProgramKind::kPythonModule:
      argv = {program.python, "-u", "-m", program.program};
      break;
    case ProgramKind::kExecutable:
      argv = {program.program};
      break;
    case ProgramKind::kTrainConfig:
      argv = {program.worker, "train", program.program};
      break;
  }
  const bool python = program.kind == ProgramKind::kPythonScript || program.kind == ProgramKind::kPythonModule;
  if (python && program.local_rank_arg) {
    argv.push_back("--local_rank=" + std::to_string(local_rank));
  }
  argv.insert(argv.end(), program.args.begin(), program.args.end());
  return argv;
}

Result<LaunchPlan> PlanLaunch(const Resources& resources, const PlanOptions& options) {
  DSLAUNCH_RETURN_IF_ERROR(ValidateOptions(resources, options));

  LaunchPlan plan;
  static_cast<PlanFacts&>(plan) = options;
  if (!options.master_addr.empty()) {
    plan.master_addr = options.master_addr;
  } else if (IsLocalhostName(resources.front().host)) {
    plan.master_addr = kLoopbackAddress;
  } else {
    plan.master_addr = resources.front().host;
  }

  int rank = 0;
  for (std::size_t i = 0; i < resources.size(); ++i) {
    const NodeResources& selected = resources[i];
    NodePlan node;
    node.node_rank = static_cast<int>(i);
    node.user = selected.user;
    node.host = selected.host;
    node.slots = selected.slots;
    for (std::size_t local = 0; local < selected.slots.size(); ++local) {
      WorkerPlan worker;
      worker.rank = rank++;
      worker.local_rank = static_cast<int>(local);
      worker.argv = WorkerArgv(options.program, worker.local_rank);
      node.workers.push_back(std::move(worker));
    }
    plan.nodes.push_back(std::move(node));
  }
  plan.world_size = rank;

  // The environment needs the complete shape (world size, node count, local world size).
  // Each worker's own variables (RANK, LOCAL_RANK) are computed when sent (WorkerOwnEnvironment).
  for (NodePlan& node : plan.nodes) {
    node.env = NodeEnvironment(plan, node, options.extra_env);
    // The bundled runtime keeps its in-memory snapshots in memory its agent holds.
    if (options.program.kind == ProgramKind::kTrainConfig) node.env[env::kSnapshotMemory] = "1";
  }
  return plan;
}

}  // namespace dslaunch::launcher
