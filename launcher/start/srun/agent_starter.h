// SrunAgentStarter: starts each node's dslaunch-agent as a Slurm job step, inside the allocation
// the launcher runs in (docs/slurm.md, "How agents start").
//
// Pre-flight is ONE step over every node to check (`srun --nodes=K --ntasks-per-node=1
// --nodelist=... /bin/sh -c CHECK`): each task enters the working directory, runs
// `AGENT --version` and prints one line naming its node (SLURMD_NODENAME), so a node that fails
// is named with its reason. Start runs one step per node
// (`srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap --kill-on-bad-exit=0 ...`), because the
// launcher starts, restarts and re-probes agents node by node (AgentStarter; elastic generations).
// The job secret is written to srun's stdin, which srun forwards to the task (its default
// --input=all for one task), and never appears on a command line or in an environment. The step's
// first output line ("dslaunch-step JOB.STEP") names it for scancel.
//
// Teardown: an agent exits after the job (AGENT_DONE) and its srun with it. Kill() sends SIGTERM to
// srun, which cancels its step (Slurm sends the agent SIGKILL, and its workers die with it); if
// srun has not ended kSrunKillWait later it gets SIGKILL and the step `scancel`.
//
// Threading: Preflight and Start on the launcher's thread; each handle's thread reads its srun's
// output and reports; handles are independent of the starter.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

// How long the pre-flight step may take: srun starts a step in tens of milliseconds; 30 s allows
// for a busy slurmctld and a cold file system on the nodes.
inline constexpr std::chrono::seconds kSrunPreflightTimeout{30};
// After Kill()'s SIGTERM, how long srun has to cancel its step before SIGKILL and scancel.
inline constexpr std::chrono::seconds kSrunKillWait{3};
// Pre-flight output kept per node line and in total (a runaway task must not fill memory).
inline constexpr size_t kMaxSrunOutput = 64u << 10;

struct SrunOptions {
  std::string srun = "srun";       // srun's path (PATH lookup without '/')
  std::string scancel = "scancel";
  // CPUs of the allocation on each node (SLURM_JOB_CPUS_PER_NODE): the agent's step asks for
  // them all (--cpus-per-task), so that a task plugin that binds CPUs does not pin every worker
  // to one. Nodes not listed: srun's default.
  std::map<std::string, int> cpus_per_node;
};

// srun's argv for starting `agent_argv` on `host` (see the file comment).
std::vector<std::string> SrunAgentArgv(const SrunOptions& options, const std::string& host,
                                       const std::vector<std::string>& agent_argv);

// srun's argv for the pre-flight step on `hosts` (distinct names).
std::vector<std::string> SrunPreflightArgv(const SrunOptions& options, const std::vector<std::string>& hosts,
                                           const PreflightChecks& checks);

// One node's pre-flight answer: "dslaunch-preflight NODE CODE TEXT" (TEXT: the version when CODE
// is 0, else what the failing command printed).
struct SrunPreflightLine {
  std::string node;
  int code = 0;
  std::string text;
};
std::optional<SrunPreflightLine> ParseSrunPreflightLine(std::string_view line);

// The failures among `nodes` given the pre-flight step's output lines, its exit and its last
// stderr line: a node without an answer fails with srun's words. Sorted by node rank.
std::vector<PreflightFailure> SrunPreflightFailures(const std::vector<NodePlan>& nodes, const PreflightChecks& checks,
                                                    const std::vector<SrunPreflightLine>& answers,
                                                    const std::string& srun_detail);

// "dslaunch-step JOB.STEP" -> "JOB.STEP"; nullopt for other lines.
std::optional<std::string> ParseStepLine(std::string_view line);

class SrunAgentStarter : public AgentStarter {
 public:
  explicit SrunAgentStarter(SrunOptions options) : options_(std::move(options)) {}
  // One step on every node (file comment). OK, or kFailedPrecondition with FormatPreflightReport's
  // text; kUnavailable when srun cannot be started; kDeadlineExceeded after kSrunPreflightTimeout.
  Status Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) override;
  Result<std::vector<PreflightFailure>> PreflightEach(const std::vector<NodePlan>& nodes,
                                                      const PreflightChecks& checks) override;
  // Starts srun for `node` with the secret on its stdin. on_output gets each line srun and the
  // agent write (the step line excepted); on_exit srun's exit status once it ends (srun exits with
  // the task's code, or 128+N), with a detail naming the node.
  Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command,
                                             std::string_view secret, AgentCallbacks callbacks) override;

 private:
  SrunOptions options_;
};

}  // namespace dslaunch::launcher
