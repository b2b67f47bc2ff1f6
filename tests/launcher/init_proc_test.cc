// Proc tests: dslaunch as a container's PID 1 (launcher/machine/init_process.h) in a PID namespace of its
// own (`unshare --pid --fork --mount-proc`), and the exit-code classes a scheduler acts on
// (docs/exit-codes.md).
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "common/exit_codes.h"
#include "common/process_tree.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{60};
constexpr char kUnshare[] = "/usr/bin/unshare";
constexpr char kNsenter[] = "/usr/bin/nsenter";

bool PidNamespacesWork() {
  return RunProcess({kUnshare, "--pid", "--fork", "--mount-proc", "/bin/true"}, std::chrono::seconds(10)).exit_code == 0;
}

// The children of `parent` in the process table, zombies included.
std::vector<ProcessEntry> ChildrenOf(pid_t parent) {
  std::vector<ProcessEntry> children;
  auto table = ReadProcessTable();
  if (!table.ok()) return children;
  for (const ProcessEntry& e : *table) {
    if (e.parent == parent) children.push_back(e);
  }
  return children;
}

// A worker that says "got TERM" and exits 7 on SIGTERM; its pid file says it is ready (the trap is
// set first).
std::string WriteTermWorker(const TempDir& dir) {
  const std::string worker = dir.path() + "/worker.sh";
  std::ofstream(worker) << "#!/bin/sh\n"
                           "trap 'echo got TERM; exit 7' TERM\n"
                           "echo $$ > " + dir.path() + "/rank$RANK.pid\n"
                           "while true; do sleep 0.05; done\n";
  std::filesystem::permissions(worker, std::filesystem::perms::owner_all);
  return worker;
}

bool EveryRankLogged(const TempDir& dir, const std::string& job, const std::string& text) {
  for (int rank = 0; rank < 2; ++rank) {
    if (!Contains(ReadWhole(dir.path() + "/logs/" + job + "/rank" + std::to_string(rank) + ".stdout.log"), text)) {
      return false;
    }
  }
  return true;
}

TEST_CASE("As PID 1 dslaunch reaps orphans, forwards SIGTERM as a job stop and exits 143") {
  DSLAUNCH_SKIP_UNLESS(PidNamespacesWork(), "pidns", "unshare --pid --fork --mount-proc does not work here");
  TempDir dir;
  const std::string worker = WriteTermWorker(dir);
  Subprocess job({kUnshare, "--pid", "--fork", "--mount-proc", "--kill-child", kLauncher, "--nproc_per_node", "2",
                  "--grace_period", "20", "--log_dir", dir.path() + "/logs", "--job_id", "pid1", "--no_python",
                  worker});
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  // unshare's child is the namespace's PID 1: dslaunch staying init, with the launcher its only child.
  std::vector<ProcessEntry> init = ChildrenOf(job.pid());
  REQUIRE(init.size() == 1);
  const pid_t pid1 = init[0].pid;
  std::vector<ProcessEntry> launcher = ChildrenOf(pid1);
  REQUIRE(launcher.size() == 1);

  // A process that enters the namespace from outside and leaves an orphan behind: the orphan is
  // re-parented to PID 1 (nothing in the namespace is its ancestor), and must be reaped when it ends.
  auto entered = RunProcess({kNsenter, "-t", std::to_string(pid1), "-p", "-m", "--", "/bin/sh", "-c",
                             "sleep 1 </dev/null >/dev/null 2>&1 & exit 0"},
                            std::chrono::seconds(10));
  REQUIRE(entered.exit_code == 0);
  CHECK(ChildrenOf(pid1).size() == 2);  // the launcher and the orphan
  CHECK(WaitFor([&] { return ChildrenOf(pid1).size() == 1; }, std::chrono::seconds(10)));  // reaped, no zombie
  for (const ProcessEntry& e : ChildrenOf(pid1)) CHECK_FALSE(e.zombie);

  // SIGTERM to PID 1 (`docker stop`, a pod's termination) reaches the launcher, which stops the job
  // with the grace period: the workers see SIGTERM.
  REQUIRE(::kill(pid1, SIGTERM) == 0);
  auto r = job.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(Contains(r.err, "the launcher received SIGTERM"));
  CHECK(EveryRankLogged(dir, "pid1", "got TERM"));
}

TEST_CASE("As PID 1 dslaunch exits with the failed rank's exit code") {
  DSLAUNCH_SKIP_UNLESS(PidNamespacesWork(), "pidns", "unshare --pid --fork --mount-proc does not work here");
  TempDir dir;
  auto r = RunProcess({kUnshare, "--pid", "--fork", "--mount-proc", "--kill-child", kLauncher, "--nproc_per_node", "2",
                       "--log_dir", dir.path() + "/logs", "--no_python", "/bin/sh", "-c",
                       "test $RANK = 1 && exit 5; sleep 30"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK(Contains(r.err, "rank 1 on host localhost"));
}

TEST_CASE("SIGUSR1 stops the job with the grace period and exits with the requeue class") {
  TempDir dir;
  const std::string worker = WriteTermWorker(dir);
  Subprocess launcher({kLauncher, "--nproc_per_node", "2", "--grace_period", "20", "--log_dir", dir.path() + "/logs",
                       "--job_id", "usr1", "--no_python", worker});
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  launcher.Signal(SIGUSR1);
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitRequeue);
  CHECK(Contains(r.err, "the launcher received SIGUSR1 (stop for a requeue: workers save on SIGTERM)"));
  CHECK(EveryRankLogged(dir, "usr1", "got TERM"));
}

}  // namespace
}  // namespace dslaunch::testing
