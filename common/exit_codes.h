// The launcher's exit-code classes, the values a scheduler matches to decide what to do next
// (Kubernetes podFailurePolicy.onExitCodes, a Slurm batch script's requeue): docs/exit-codes.md.
//
//   0                 every worker exited 0
//   the rank's code   the user's program failed: the root-cause rank's exit code, or 128+N when it
//                     died of signal N (137 for SIGKILL, also a hung rank killed by the watchdog)
//   128+N             the launcher was stopped by signal N (SIGTERM 143, SIGINT 130, SIGHUP 129),
//                     after the workers' grace period (save-on-stop checkpoints)
//   kExitUsage        configuration error: nothing was started (bad option, hostfile, train.json)
//   kExitInfrastructure  the job's machinery failed, not the program: a node or agent lost, an
//                     agent that could not start, the rendezvous endpoint unreachable or not
//                     bindable; retrying elsewhere may succeed
//   kExitRequeue      stopped on request (SIGUSR1, Slurm's --signal=USR1@T) after the workers'
//                     save-on-stop: run the job again and it resumes
//
// A program that itself exits 75 or 76 reads as those classes; the summary line names the cause.
//
// Schedulers that read codes by range get the classes translated at the process's exit
// (--exit_codes, ExitCodeScheme below): Kubeflow's PyTorchJob with `restartPolicy: ExitCode`
// fails a replica for good on 1-127 and restarts it on 128-255, so under `kubeflow` the retryable
// classes move above 128 and the configuration error stays where it is.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

inline constexpr int kExitSuccess = 0;
// Bad usage, as command-line tools conventionally report it (and as Python's argparse does).
inline constexpr int kExitUsage = 2;
// EX_TEMPFAIL of sysexits.h: "a temporary failure; the user is invited to retry".
inline constexpr int kExitInfrastructure = 75;
// The code after EX_TEMPFAIL, reserved for "checkpointed and stopped on request: requeue me".
inline constexpr int kExitRequeue = 76;

// How the classes are written as the process's exit code (docs/exit-codes.md, "Controllers").
enum class ExitCodeScheme {
  kClasses,   // the codes above, unchanged (podFailurePolicy, JobSet, Slurm read them as they are)
  kKubeflow,  // PyTorchJob's restartPolicy ExitCode: the retryable classes as 128 + class
};
// PyTorchJob's ExitCode policy restarts a replica that exited with 128 or more (a signal, in its
// reading) and fails the job on 1-127. 128+75 and 128+76 are no real signal (Linux's last is 64,
// so a signal's code is at most 192) and keep the class readable: subtract 128.
inline constexpr int kKubeflowRetryableBase = 128;
inline constexpr int kExitInfrastructureKubeflow = kKubeflowRetryableBase + kExitInfrastructure;  // 203
inline constexpr int kExitRequeueKubeflow = kKubeflowRetryableBase + kExitRequeue;                // 204

// The exit code the process ends with for the class `code` under `scheme`: under kKubeflow 75
// becomes 203 and 76 becomes 204; every other code (0, 2, a rank's own code, 128+N) is unchanged.
int SchedulerExitCode(int code, ExitCodeScheme scheme);

// --exit_codes' value: "classes" or "kubeflow". kInvalidArgument naming the value and the two
// accepted otherwise.
Result<ExitCodeScheme> ParseExitCodeScheme(std::string_view text);
std::string_view ExitCodeSchemeName(ExitCodeScheme scheme);

}  // namespace dslaunch
