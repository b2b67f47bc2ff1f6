// Proc tests of containment: what a job leaves behind on this machine (processes that escaped
// the workers' process groups, inherited descriptors, the secret in the environment, secret
// directories of killed agents) and what the summary blames when the launcher is suspended.
// The real dslaunch, dslaunch-agent and env_check binaries.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/exit_codes.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
// Hang guard for one launcher run; the jobs themselves take about a second.
constexpr std::chrono::seconds kRunTimeout{60};

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<std::string> EnvCheckJob(const TempDir& dir, const std::vector<std::string>& options,
                                     const std::vector<std::string>& worker_args) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

TEST_CASE("A process a worker moved into a session of its own is stopped with the job, whether it succeeds or fails") {
  struct Case {
    std::string name;
    std::vector<std::string> worker_args;
    int exit_code;
    // On success the escapees are found by the agent's final sweep; on failure they get SIGTERM
    // with the other workers when the job stops, and nothing is left to sweep.
    bool swept;
  };
  for (const Case& c : {Case{"success", {}, 0, true}, Case{"failure", {"--fail_rank", "1", "--exit_code", "5"}, 5, false}}) {
    CAPTURE(c.name);
    TempDir dir;
    const std::string escape_dir = dir.path() + "/escape";
    std::filesystem::create_directory(escape_dir);
    std::vector<std::string> args = {"--escape_dir", escape_dir};
    args.insert(args.end(), c.worker_args.begin(), c.worker_args.end());
    auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "2"}, args), kRunTimeout);
    INFO(r.err);
    CHECK(r.exit_code == c.exit_code);
    std::vector<pid_t> escapees = ReadPidFiles(escape_dir);
    REQUIRE(escapees.size() == 2);
    // The agent swept them before it exited: no waiting here.
    for (pid_t pid : escapees) {
      CAPTURE(pid);
      CHECK_FALSE(ProcessAlive(pid));
    }
    CHECK(Contains(r.err, "killed 2 leftover processes of the job's workers") == c.swept);
  }
}

TEST_CASE("Workers inherit no descriptor but stdin, stdout and stderr") {
  // Before the fix the launcher's listening socket (Asio opens sockets without SOCK_CLOEXEC) was
  // descriptor 8 of every agent and worker, so a process that outlived the job kept the port.
  TempDir dir;
  auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "2"}, {"--check_fds"}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 1] rank 1 of 2: environment ok"));
}

// env_check --check_fds counts the memory files named by DSLAUNCH_SNAPSHOT_FDS: two when the worker
// asked (DSLAUNCH_SNAPSHOT_MEMORY=1), none otherwise (the test above).
TEST_CASE("A worker that asks for snapshot memory inherits its local rank's two memory files, and nothing else") {
  TempDir dir;
  auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "2", "--export", "DSLAUNCH_SNAPSHOT_MEMORY=1"},
                                  {"--check_fds", "--expect_env", "DSLAUNCH_SNAPSHOT_MEMORY=1"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 1] rank 1 of 2: environment ok"));
}

TEST_CASE("--no_ssh: the job secret given to the launcher never reaches a worker's environment") {
  TempDir dir;
  std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "localhost slots=2\n";
  // One node: the launcher binds port 0 and gives its own agent the real one.
  auto r = RunProcess(EnvCheckJob(dir, {"--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1", "--rdzv_port",
                                        "0", "--job_id", "nossh-secret", "-H", hosts},
                                  {}),
                      kRunTimeout, {"DSLAUNCH_JOB_SECRET=0123456789abcdef0123456789abcdef"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(Contains(r.err, "the secret is in the environment"));
  CHECK(Contains(r.out, "rank 0 of 2: environment ok"));
}

TEST_CASE("--no_ssh --rdzv_port 0 is refused for more than one node, before anything starts") {
  TempDir dir;
  std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "localhost slots=1\n127.0.0.1 slots=1\n";
  auto r = RunProcess({kLauncher, "--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1", "--rdzv_port", "0",
                       "--job_id", "j", "-H", hosts, "--no_python", "/bin/true"},
                      kRunTimeout, {"DSLAUNCH_JOB_SECRET=0123456789abcdef0123456789abcdef"});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "dslaunch: --rdzv_port 0 (any free port) works only for a one-node job: the other 1 nodes must know the "
        "port in advance; give every node the same --rdzv_port\n");
}

TEST_CASE("An agent removes the secret directories of agents that were killed before cleaning up") {
  TempDir dir;
  const std::string tmp = dir.path() + "/tmp";
  std::filesystem::create_directory(tmp);
  // A pid that no longer runs: a child that has exited and been reaped.
  Subprocess gone({"/bin/true"});
  pid_t dead = gone.pid();
  gone.Wait(kRunTimeout);
  const std::string stale = tmp + "/dslaunch-oldjob-n0-" + std::to_string(dead);
  std::filesystem::create_directory(stale);
  ::chmod(stale.c_str(), 0700);
  std::ofstream(stale + "/store.secret") << "old secret\n";
  // A directory named for a pid that now runs another program (this test): stale as well.
  const std::string live = tmp + "/dslaunch-otherjob-n0-" + std::to_string(::getpid());
  std::filesystem::create_directory(live);
  const std::string unrelated = tmp + "/dslaunch-notes";
  std::filesystem::create_directory(unrelated);
  // The same dead pid, but the directory says its agent lives in another PID namespace (a
  // container sharing this directory): there the number means another process, so it stays.
  const std::string foreign = tmp + "/dslaunch-podjob-n1-" + std::to_string(dead);
  std::filesystem::create_directory(foreign);
  ::chmod(foreign.c_str(), 0700);
  std::ofstream(foreign + "/pid_namespace") << "pid:[1]\n";
  // And one of this PID namespace, named as a real agent names it: judged by its pid, stale.
  const std::string own = tmp + "/dslaunch-ownjob-n2-" + std::to_string(dead);
  std::filesystem::create_directory(own);
  ::chmod(own.c_str(), 0700);
  std::ofstream(own + "/pid_namespace") << std::filesystem::read_symlink("/proc/self/ns/pid").string() << "\n";

  auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "1"}, {}), kRunTimeout, {"TMPDIR=" + tmp});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(stale));
  // A pid that runs another program counts as gone (pids are recycled); names that are not the
  // agent's are never touched.
  CHECK_FALSE(std::filesystem::exists(live));
  CHECK(std::filesystem::exists(unrelated));
  CHECK(std::filesystem::exists(foreign));
  CHECK_FALSE(std::filesystem::exists(own));
}

TEST_CASE("A launcher stopped past the heartbeat timeout is not blamed on a worker's SIGTERM") {
  TempDir dir;
  auto launcher = std::make_unique<Subprocess>(
      EnvCheckJob(dir, {"--nproc_per_node", "2", "--heartbeat_timeout", "2"}, {"--hang"}));
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  launcher->Signal(SIGSTOP);
  // The agent gives up on the launcher after 2 s of silence and stops its workers; wait until it
  // has (both workers gone) before letting the launcher run again.
  std::vector<pid_t> workers = ReadPidFiles(dir.path());
  bool stopped = WaitFor([&] {
    for (pid_t p : workers) {
      if (ProcessAlive(p)) return false;
    }
    return true;
  }, std::chrono::seconds(20));
  launcher->Signal(SIGCONT);
  REQUIRE(stopped);
  auto r = launcher->Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "failed: the agent of node 0 on host localhost stopped its workers: no heartbeat from "
                        "the launcher for "));
  CHECK_FALSE(Contains(r.err, "SIGTERM"));
}

TEST_CASE("The root cause is the rank that failed first on its own, not a collateral rank that exited before it") {
  // Rank 0 hits its own error (a full disk) and takes 500 ms to exit; rank 1 fails 100 ms later
  // only because rank 0 did, and exits at once. Exit order alone would blame rank 1.
  TempDir dir;
  auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "3"},
                                  {"--own_error_rank", "0", "--exit_code", "28", "--peer_error_rank", "1",
                                   "--ignore_sigterm"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 28);
  CHECK(Contains(r.err, "failed: rank 0 on host localhost"));
  CHECK(Contains(r.err, "exited with exit code 28\n"));
  CHECK(Contains(r.err, "dslaunch: its error: rank 0: No space left on device (on purpose)\n"));
  CHECK_FALSE(Contains(r.err, "failed: rank 1"));
}

}  // namespace
}  // namespace dslaunch::testing
