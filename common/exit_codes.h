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
#pragma once

namespace dslaunch {

inline constexpr int kExitSuccess = 0;
// Bad usage, as command-line tools conventionally report it (and as Python's argparse does).
inline constexpr int kExitUsage = 2;
// EX_TEMPFAIL of sysexits.h: "a temporary failure; the user is invited to retry".
inline constexpr int kExitInfrastructure = 75;
// The code after EX_TEMPFAIL, reserved for "checkpointed and stopped on request: requeue me".
inline constexpr int kExitRequeue = 76;

}  // namespace dslaunch
