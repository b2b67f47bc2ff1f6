// Proc tests of --exit_codes (common/exit_codes.h, docs/exit-codes.md): the real launcher and a
// node-mode agent write the infrastructure and requeue classes as 203 and 204 under `kubeflow`,
// which a PyTorchJob's restartPolicy ExitCode retries, and leave every other code alone.
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>

#include "common/exit_codes.h"
#include "tests/support/proc_checks.h"
#include "tests/support/reserved_port.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{60};
const std::vector<std::string> kSecret = {"DSLAUNCH_JOB_SECRET=0123456789abcdef0123456789abcdef"};

// A node of a 2-node job whose endpoint is `port` on loopback, joining within a second.
std::vector<std::string> Node(const TempDir& dir, const ReservedPort& port, const char* rank,
                              std::vector<std::string> options) {
  std::vector<std::string> argv = {kLauncher, "--rdzv_endpoint", "127.0.0.1:" + std::to_string(port.port()),
                                   "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", rank,
                                   "--rdzv_conf", "join_timeout=1", "--log_dir", dir.path() + "/logs"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", "/bin/true"});
  return argv;
}

TEST_CASE("Under --exit_codes kubeflow the host of a rendezvous nobody joined exits 203, not 75") {
  TempDir dir;
  ReservedPort port;
  auto plain = RunProcess(Node(dir, port, "0", {}), kRunTimeout, kSecret);
  CHECK(plain.exit_code == kExitInfrastructure);
  auto r = RunProcess(Node(dir, port, "0", {"--exit_codes", "kubeflow"}), kRunTimeout, kSecret);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructureKubeflow);
  CHECK(Contains(r.err, "dslaunch: rendezvous failed: only 1 of at least 2 nodes joined within 1 s"));
  CHECK(Contains(r.err, "dslaunch: exit code 75 written as 203 (--exit_codes kubeflow)\n"));
}

TEST_CASE("A joining node (its agent, exec'd) whose endpoint never answers exits 203 under PET_EXIT_CODES=kubeflow") {
  TempDir dir;
  ReservedPort port;  // held, nothing listens: the join times out
  auto plain = RunProcess(Node(dir, port, "1", {}), kRunTimeout, kSecret);
  CHECK(plain.exit_code == kExitInfrastructure);
  std::vector<std::string> env = kSecret;
  env.push_back("PET_EXIT_CODES=kubeflow");
  auto r = RunProcess(Node(dir, port, "1", {}), kRunTimeout, env);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructureKubeflow);
  CHECK(Contains(r.err, "]: exit code 75 written as 203 (--exit_codes kubeflow)\n"));
}

TEST_CASE("Under --exit_codes kubeflow SIGUSR1 gives 204, a rank's own code and a usage error stay as they are") {
  TempDir dir;
  const std::string worker = dir.path() + "/worker.sh";
  std::ofstream(worker) << "#!/bin/sh\n"
                           "trap 'exit 7' TERM\n"
                           "echo $$ > " + dir.path() + "/rank$RANK.pid\n"
                           "while true; do sleep 0.05; done\n";
  std::filesystem::permissions(worker, std::filesystem::perms::owner_all);
  Subprocess launcher({kLauncher, "--exit_codes", "kubeflow", "--nproc_per_node", "2", "--grace_period", "20",
                       "--log_dir", dir.path() + "/logs", "--no_python", worker});
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  launcher.Signal(SIGUSR1);
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitRequeueKubeflow);

  auto failed = RunProcess({kLauncher, "--exit_codes", "kubeflow", "--nproc_per_node", "2", "--log_dir",
                            dir.path() + "/logs2", "--no_python", "/bin/sh", "-c", "exit 5"},
                           kRunTimeout);
  CHECK(failed.exit_code == 5);
  CHECK_FALSE(Contains(failed.err, "written as"));
  auto usage = RunProcess({kLauncher, "--exit_codes", "kubeflow", "--nproc_per_node", "two", "x.py"}, kRunTimeout);
  CHECK(usage.exit_code == kExitUsage);
  auto bad = RunProcess({kLauncher, "--exit_codes", "k8s", "x.py"}, kRunTimeout);
  CHECK(bad.exit_code == kExitUsage);
  CHECK(Contains(bad.err, "dslaunch: --exit_codes 'k8s': expected 'classes'"));
}

}  // namespace
}  // namespace dslaunch::testing
