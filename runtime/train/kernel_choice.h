// The node's OpenBLAS kernels for the bundled runtime (docs/engine.md, "Matrix kernels"): timed
// once per node and job by the first of its workers, in child processes (OpenBLAS reads
// OPENBLAS_CORETYPE only when it loads), written to a file in the job's directory that the node's
// other workers read, and applied by each worker re-executing itself with OPENBLAS_CORETYPE set.
//
//   DSLAUNCH_SGEMM_KERNEL   auto (default): time OpenBLAS's own kernels and the candidates the CPU
//                           supports (runtime/ops/cpu/sgemm_choice.h), take the rule's choice;
//                           "default": OpenBLAS's own, timed for the start-up line only;
//                           a core type ("SkylakeX"): that one, after its exactness check.
//   OPENBLAS_CORETYPE       set by the user: honoured as it is (timed for the line only).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/config/train_config.h"
#include "runtime/ops/cpu/sgemm_choice.h"

namespace dslaunch::runtime {

inline constexpr char kSgemmKernelEnv[] = "DSLAUNCH_SGEMM_KERNEL";
inline constexpr char kOpenBlasCoreTypeEnv[] = "OPENBLAS_CORETYPE";
// Set by the re-execution that applies a choice (its value the core type): the process then runs
// the chosen kernels and does not choose again.
inline constexpr char kSgemmAppliedEnv[] = "DSLAUNCH_SGEMM_APPLIED";
// How long each kernel is timed: tens of milliseconds in all, per node and job.
inline constexpr std::chrono::milliseconds kProbeBudget{25};
// A probe that has not answered by then is killed and counts as failed (a kernel that hangs).
inline constexpr std::chrono::seconds kProbeTimeout{20};

// The products a probe times for this config's model: a GPT block's twelve (GptBlockProducts) or
// an mlp's layers, at the model's width, with the rows raised to 64 and the width to 128 (a tiny
// test model's sizes measure call overhead, not kernels) and cut so that one pass is about
// 1 GFLOP, down to 16 rows (TimeProducts stops within its budget anyway); widths beyond 2048 (gpt)
// or 4096 (mlp layers, and their rows) are cut there, so that a probe never needs much memory. Pure.
std::vector<ops::ProductShape> ProbeProducts(const TrainConfig& config);

// What DSLAUNCH_SGEMM_KERNEL and OPENBLAS_CORETYPE ask for. Pure.
struct KernelRequest {
  enum class Mode { kAuto, kDefault, kForced } mode = Mode::kAuto;
  std::string core_type;  // kForced
  std::string source;     // the start-up line's parenthesis: who decided
};
// kInvalidArgument naming the variable for a DSLAUNCH_SGEMM_KERNEL that is neither "auto",
// "default" nor a core type OpenBLAS knows (the CandidateCoreTypes of any CPU).
Result<KernelRequest> ParseKernelRequest(const std::map<std::string, std::string>& env);

// The core types to time after OpenBLAS's own for a request on a CPU. Pure.
std::vector<std::string> CoreTypesToTime(const KernelRequest& request, const ops::CpuFeatures& cpu);

// The choice from the timed rates (own first, then CoreTypesToTime's order): kAuto applies
// ops::ChooseKernel; kDefault keeps the own kernels; kForced takes the forced one. An own (or
// forced) kernel that is not exact is kFailedPrecondition with the rates. Pure.
Result<ops::KernelChoice> DecideKernel(const KernelRequest& request, const std::vector<ops::KernelRate>& rates);

// The node's choice, made or read: `line` for the start-up output, `choice` to apply.
struct NodeKernel {
  ops::KernelChoice choice;
  std::string line;
};

// Chooses the node's kernels for `config` (see the top of this file): with a job directory in
// `env` (DSLAUNCH_JOB_DIR), under a lock on JOB_DIR/sgemm-kernels.HOST.lock, reads the rates of
// JOB_DIR/sgemm-kernels.HOST or times them and writes that file (so a restart of the job reuses
// it); without one, times them for this process. Timing runs `self_exe sgemm-probe SHAPES...`
// once per kernel (OpenBLAS's own with the environment as it is, each candidate with
// OPENBLAS_CORETYPE set). Errors: a bad DSLAUNCH_SGEMM_KERNEL, a job directory that cannot be
// used, no exact kernel.
Result<NodeKernel> ChooseNodeKernel(const std::map<std::string, std::string>& env, const TrainConfig& config,
                                    const std::string& self_exe);

// When `kernel` names a core type this process does not run yet (no DSLAUNCH_SGEMM_APPLIED),
// re-executes `argv` through /proc/self/exe with OPENBLAS_CORETYPE and DSLAUNCH_SGEMM_APPLIED
// set: it returns only with the reason the exec failed. Otherwise returns OK at once.
Status ApplyNodeKernel(const NodeKernel& kernel, const std::map<std::string, std::string>& env,
                       const std::vector<std::string>& argv);

}  // namespace dslaunch::runtime
