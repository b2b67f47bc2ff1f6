// Proc tests: the real dslaunch, dslaunch-agent and worker binaries, real processes and sockets.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/support/reserved_port.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
// Hang guard for one launcher run; the jobs themselves take well under a second.
constexpr std::chrono::seconds kRunTimeout{60};

std::vector<std::string> Launch(const TempDir& dir, std::vector<std::string> options,
                                std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--no_python");
  argv.push_back(kEnvCheck);
  argv.push_back("--pid_dir");
  argv.push_back(dir.path());
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

void CheckNoWorkerAlive(const TempDir& dir, size_t expected_pids) {
  std::vector<pid_t> pids = ReadPidFiles(dir.path());
  CHECK(pids.size() == expected_pids);
  for (pid_t pid : pids) {
    CAPTURE(pid);
    CHECK_FALSE(ProcessAlive(pid));
  }
}

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST_CASE("Eight local ranks get the environment contract and meet at a store barrier") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {"--nproc_per_node", "8"}, {"--expect_world", "8", "--expect_local_world", "8"}),
                      kRunTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    CHECK(Contains(r.out, "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                              " of 8: environment ok\n"));
  }
  CheckNoWorkerAlive(dir, 8);
  // Per-rank logs under LOG_DIR/JOB_ID/.
  size_t logs = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path() + "/logs")) {
    if (e.path().filename() == "rank7.stdout.log") {
      std::ifstream f(e.path());
      std::string line;
      std::getline(f, line);
      CHECK(line == "rank 7 of 8: environment ok");
    }
    if (e.path().extension() == ".log") ++logs;
  }
  CHECK(logs == 16);
}

TEST_CASE("A rank that exits 3 makes the launcher exit 3 and stops every other worker") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {"--nproc_per_node", "8"}, {"--fail_rank", "3", "--exit_code", "3"}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(Contains(r.err, "rank 3 on host localhost"));
  CHECK(Contains(r.err, "exited with exit code 3"));
  CHECK(Contains(r.err, "rank 3 failing on purpose"));
  CHECK(Contains(r.err, "rank3.stderr.log"));
  CheckNoWorkerAlive(dir, 8);
}

TEST_CASE("A rank killed by SIGKILL makes the launcher exit 137 and names the signal") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {"--nproc_per_node", "4"}, {"--kill_rank", "2"}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 137);
  CHECK(Contains(r.err, "rank 2 on host localhost"));
  CHECK(Contains(r.err, "signal 9 (SIGKILL)"));
  CheckNoWorkerAlive(dir, 4);
}

// Starts `ranks` workers that ignore SIGTERM and hang, and waits until all of them are running.
std::unique_ptr<Subprocess> StartHangingJob(const TempDir& dir, int ranks) {
  // TMPDIR points into the test's directory, so the agent's private secret directory is visible.
  std::filesystem::create_directory(dir.path() + "/tmp");
  auto launcher = std::make_unique<Subprocess>(
      Launch(dir, {"--nproc_per_node", std::to_string(ranks), "--grace_period", "0.5"}, {"--hang", "--ignore_sigterm"}),
      std::vector<std::string>{"TMPDIR=" + dir.path() + "/tmp"});
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == static_cast<size_t>(ranks); },
                  std::chrono::seconds(30)));
  for (pid_t pid : ReadPidFiles(dir.path())) CHECK(ProcessAlive(pid));
  return launcher;
}

TEST_CASE("SIGTERM, SIGINT or SIGHUP to the launcher stops workers that ignore SIGTERM and exits 128+N") {
  for (auto [sig, name] : {std::pair{SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGHUP, "SIGHUP"}}) {
    CAPTURE(name);
    TempDir dir;
    auto launcher = StartHangingJob(dir, 4);
    launcher->Signal(sig);
    auto r = launcher->Wait(kRunTimeout);
    INFO(r.err);
    CHECK(r.exit_code == 128 + sig);
    CHECK(Contains(r.err, std::string("the launcher received ") + name));
    CheckNoWorkerAlive(dir, 4);
  }
}

TEST_CASE("SIGKILL of the launcher leaves no worker running and no secret file once its agent notices") {
  TempDir dir;
  auto launcher = StartHangingJob(dir, 3);
  CHECK_FALSE(std::filesystem::is_empty(dir.path() + "/tmp"));  // the agent's secret directory
  launcher->Signal(SIGKILL);
  launcher->Wait(kRunTimeout);
  std::vector<pid_t> pids = ReadPidFiles(dir.path());
  // The agent sees its control connection close, sends SIGTERM, then SIGKILL after 0.5 s, and
  // removes the workers' secret file as it exits.
  CHECK(WaitFor([&] {
    for (pid_t p : pids) {
      if (ProcessAlive(p)) return false;
    }
    return std::filesystem::is_empty(dir.path() + "/tmp");
  }, std::chrono::seconds(10)));
}

TEST_CASE("A program that cannot be executed fails with 127 and says why") {
  TempDir dir;
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--nproc_per_node", "2", "--no_python",
                       dir.path() + "/no-such-program"},
                      kRunTimeout);
  CHECK(r.exit_code == 127);
  CHECK(Contains(r.err, "cannot execute"));
  CHECK(Contains(r.err, "no-such-program"));
}

TEST_CASE("Arguments after PROGRAM reach the workers untouched") {
  TempDir dir;
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--no_python", "/bin/echo", "--hostfile", "x",
                       "--num_gpus", "3", "--"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] --hostfile x --num_gpus 3 --\n");
}

TEST_CASE("The launcher raises its soft descriptor limit to the hard one; workers keep the user's") {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  constexpr int kUserSoftLimit = 512;
  if (limit.rlim_max <= static_cast<rlim_t>(kUserSoftLimit)) {
    MESSAGE("hard RLIMIT_NOFILE is " << limit.rlim_max << ": nothing to raise, skipped");
    return;
  }
  TempDir dir;
  // The worker prints its own soft limit, then the launcher's: its parent is the agent, whose
  // parent is the launcher.
  const std::string show =
      "echo worker=$(ulimit -Sn); "
      "echo launcher=$(awk '/^Max open files/ {print $4}' /proc/$(cut -d' ' -f4 /proc/$PPID/stat)/limits)";
  auto r = RunProcess({"/bin/sh", "-c", "ulimit -Sn " + std::to_string(kUserSoftLimit) + " && exec \"$0\" \"$@\"",
                       kLauncher, "--log_dir", dir.path(), "--no_python", "/bin/sh", "-c", show},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] worker=" + std::to_string(kUserSoftLimit) + "\n[rank 0] launcher=" +
                     std::to_string(limit.rlim_max) + "\n");
}

TEST_CASE("A Python script runs under python3 -u with --local_rank before its arguments") {
  TempDir dir;
  std::string script = dir.path() + "/show.py";
  std::ofstream(script) << "import os, sys\nprint(os.environ['RANK'], ' '.join(sys.argv[1:]))\n";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--nproc_per_node", "2", script, "--lr", "3e-4"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 0] 0 --local_rank=0 --lr 3e-4\n"));
  CHECK(Contains(r.out, "[rank 1] 1 --local_rank=1 --lr 3e-4\n"));
}

TEST_CASE("A torchrun script that refuses --local_rank fails with a hint of --no_local_rank, and runs with it") {
  TempDir dir;
  std::string script = dir.path() + "/strict.py";
  std::ofstream(script) << "import argparse, os\nargparse.ArgumentParser().parse_args()\nprint('local', os.environ['LOCAL_RANK'])\n";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--nproc_per_node", "2", script}, kRunTimeout);
  CHECK(r.exit_code == 2);  // argparse's usage error
  CHECK(Contains(r.err, "unrecognized arguments: --local_rank="));
  CHECK(Contains(r.err, "dslaunch: hint: the program does not take the --local_rank=N argument dslaunch passes to "
                        "Python programs (as DeepSpeed's launcher does); add --no_local_rank"));
  r = RunProcess({kLauncher, "--log_dir", dir.path(), "--nproc_per_node", "2", "--no_local_rank", script}, kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 1] local 1\n"));
}

TEST_CASE("A worker whose Python lacks a module fails with a hint of --python") {
  TempDir dir;
  std::string script = dir.path() + "/needs.py";
  std::ofstream(script) << "import dslaunch_no_such_module\n";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--nproc_per_node", "1", script}, kRunTimeout);
  CHECK(r.exit_code == 1);
  CHECK(Contains(r.err, "dslaunch: hint: the workers' Python has no module 'dslaunch_no_such_module'; give the "
                        "interpreter that has it with --python PATH"));
}

TEST_CASE("A MASTER_ADDR that is not an address of rank 0's node is said before the workers start") {
  TempDir dir;
  // 203.0.113.77 (TEST-NET-3) is no address of this machine (tests/common/route_test.cc assumes
  // so too). The job runs all the same: such an address can be valid (NAT, a ClusterIP Service).
  auto r = RunProcess({kLauncher, "--log_dir", dir.path(), "--master_addr", "203.0.113.77", "--no_python", "/bin/sh",
                       "-c", "echo $MASTER_ADDR"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] 203.0.113.77\n");
  CHECK(Contains(r.err, "]: warning: MASTER_ADDR 203.0.113.77 is not an address of "));
  CHECK(Contains(r.err, ", which runs rank 0"));
  // The default MASTER_ADDR is rank 0's node's own: no warning.
  r = RunProcess({kLauncher, "--log_dir", dir.path(), "--no_python", "/bin/true"}, kRunTimeout);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(Contains(r.err, "MASTER_ADDR"));
}

TEST_CASE("A missing hostfile is an error, never a silent local run") {
  auto r = RunProcess({kLauncher, "--hostfile", "/nonexistent/hosts", "--no_python", "/bin/true"}, kRunTimeout);
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "/nonexistent/hosts"));
  CHECK(r.out.empty());
}

TEST_CASE("An unknown option is an error with a suggestion") {
  auto r = RunProcess({kLauncher, "--hostfiel", "hosts", "train.py"}, kRunTimeout);
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "unknown option '--hostfiel'"));
  CHECK(Contains(r.err, "did you mean '--hostfile'?"));
}

TEST_CASE("--dry-run=json prints the plan and starts nothing") {
  TempDir dir;
  std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "worker-0 slots=4\nworker-1 slots=4 # second\n";
  auto r = RunProcess({kLauncher, "-H", hosts, "--include", "worker-0:1,3@worker-1:0", "--dry-run=json",
                       "train.py", "--epochs", "2"},
                      kRunTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto plan = nlohmann::json::parse(r.out);
  CHECK(plan["world_size"] == 3);
  CHECK(plan["nodes"].size() == 2);
  CHECK(plan["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "1,3");
  CHECK(plan["nodes"][0]["workers"][1]["env"]["RANK"] == "1");
}

}  // namespace
}  // namespace dslaunch::testing

namespace dslaunch::testing {
namespace {

TEST_CASE("--no_ssh: node 0 hosts the launcher and node 1 joins it with the shared secret") {
  TempDir dir;
  std::string hosts = dir.path() + "/hosts";
  // Two "nodes" on this machine: distinct host entries, both local.
  std::ofstream(hosts) << "localhost slots=2\n127.0.0.1 slots=2\n";
  // --no_ssh needs a port every node knows in advance: held by this test until the end, and bound
  // by node 0's endpoint beside the reservation (tests/support/reserved_port.h).
  ReservedPort reserved;
  std::string port = std::to_string(reserved.port());
  auto node = [&](int rank) {
    return std::vector<std::string>{kLauncher, "--no_ssh", "--node_rank", std::to_string(rank), "--master_addr",
                                    "127.0.0.1", "--rdzv_port", port, "--job_id", "nossh-test", "-H", hosts,
                                    "--log_dir", dir.path() + "/logs", "--no_python", kEnvCheck, "--pid_dir",
                                    dir.path(), "--expect_world", "4", "--expect_nodes", "2"};
  };
  const std::vector<std::string> secret = {"DSLAUNCH_JOB_SECRET=0123456789abcdef0123456789abcdef"};
  Subprocess node1(node(1), secret);  // may start first: its agent retries until node 0 listens
  Subprocess node0(node(0), secret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(Contains(r0.out, "rank " + std::to_string(rank) + " of 4: environment ok"));
  }
  CheckNoWorkerAlive(dir, 4);
}

TEST_CASE("--no_ssh without a shared secret is refused before anything starts") {
  auto r = RunProcess({kLauncher, "--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1", "--job_id", "j",
                       "--no_python", "/bin/true"},
                      kRunTimeout, {"DSLAUNCH_JOB_SECRET="});
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "DSLAUNCH_JOB_SECRET"));
}

TEST_CASE("Workers get NCCL's, Gloo's and TensorPipe's interface (the route to the master) and async error handling, unless the user set them") {
  TempDir dir;
  for (auto [options, expected] : {std::pair<std::vector<std::string>, std::string>{{}, "NCCL_SOCKET_IFNAME=lo"},
                                   {{"--export", "NCCL_SOCKET_IFNAME=eth9"}, "NCCL_SOCKET_IFNAME=eth9"},
                                   {{}, "GLOO_SOCKET_IFNAME=lo"},
                                   {{"--export", "GLOO_SOCKET_IFNAME=eth9"}, "GLOO_SOCKET_IFNAME=eth9"},
                                   {{}, "TP_SOCKET_IFNAME=lo"},
                                   {{}, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"},
                                   {{}, "NCCL_ASYNC_ERROR_HANDLING=1"},
                                   {{"--export", "TORCH_NCCL_ASYNC_ERROR_HANDLING=0"}, "TORCH_NCCL_ASYNC_ERROR_HANDLING=0"}}) {
    CAPTURE(expected);
    options.insert(options.end(), {"--nproc_per_node", "2"});
    auto r = RunProcess(Launch(dir, options, {"--expect_env", expected}), kRunTimeout);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
}

}  // namespace
}  // namespace dslaunch::testing
