// How a planned job's agents start (docs/slurm.md, "Which launcher"): on this machine, by the
// nodes themselves (--no_ssh), as Slurm job steps (srun) or over SSH. ChooseAgentStart and
// StartDescriptors are pure; MakeStarters builds the chosen starter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "common/status.h"
#include "launcher/plan/resource_filter.h"
#include "launcher/slurm/allocation.h"
#include "launcher/start/agent_starter.h"
#include "launcher/start/ssh/options.h"

namespace dslaunch::launcher {

enum class AgentStart { kLocal, kNoSsh, kSrun, kSsh };

// Descriptors the launcher holds for an agent it starts on this machine (its stdout and stderr
// pipes, a pidfd), counted in the endpoint's budget.
inline constexpr int64_t kLocalAgentDescriptors = 4;

struct AgentStartFacts {
  bool no_ssh = false;                    // --no_ssh
  std::optional<LauncherKind> requested;  // --launcher
  LauncherChoice launcher;                // ChooseLauncher's answer (Slurm or not)
  bool one_local_node = false;            // the selection is this machine alone
};

// --no_ssh wins; else srun when the launcher is Slurm; local when asked, or automatically for a
// selection of this machine alone (as before Slurm: a hostfile of this machine runs without SSH);
// else SSH. kInvalidArgument when --launcher local meets a selection beyond this machine (naming
// its size and first host).
Result<AgentStart> ChooseAgentStart(const AgentStartFacts& facts, const Resources& selection);

// The descriptors a starter holds open while the job runs, for the endpoint's budget: a local
// agent's pipes; one SSH session per node, or past the tree threshold one per head (at most
// ssh.fanout, docs/ssh.md "The start tree"); none for --no_ssh and srun.
int64_t StartDescriptors(AgentStart start, int64_t nodes, const SshOptions& ssh);

// The job's starter, and the factory of the separate starters that re-probe failed nodes (empty
// for --no_ssh: every other node's agent is started by hand, so a lost node cannot be re-probed
// from here).
struct Starters {
  std::unique_ptr<AgentStarter> starter;
  std::function<std::unique_ptr<AgentStarter>()> probe;
};

// `allocation`: the Slurm allocation, needed for kSrun only; `ssh`: for kSsh only.
Starters MakeStarters(AgentStart start, std::optional<uint64_t> agent_open_files, const SlurmAllocation* allocation,
                      const SshOptions& ssh);

}  // namespace dslaunch::launcher
