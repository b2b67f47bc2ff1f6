// Proc tests of generations and restarts (docs/elastic.md): the real dslaunch, dslaunch-agent and
// env_check on this machine, one or two local nodes.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
// Hang guard for one launcher run; each job takes a second or two.
constexpr std::chrono::seconds kRunTimeout{60};

std::vector<std::string> Launch(const TempDir& dir, std::vector<std::string> options,
                                std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2",
                                   "--nproc_per_node", "2"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

TEST_CASE("DeepSpeed's --elastic_training restarts a failed job (budget 100) and --min_elastic_nodes is checked "
          "against the hosts there are") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {"--elastic_training"},
                             {"--fail_rank", "1", "--exit_code", "3", "--until_generation", "1"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "; restarting on the same 1 node (restart 1 of 100)\n"));
  TempDir refused_dir;
  auto refused = RunProcess(Launch(refused_dir, {"--elastic_training", "--min_elastic_nodes", "2"}, {}), kRunTimeout);
  CHECK(refused.exit_code == 2);
  CHECK(Contains(refused.err, "--elastic_training --min_elastic_nodes 2: the job needs at least 2 nodes but the "
                              "hostfile selection has 1"));
  CHECK(ReadPidFiles(refused_dir.path()).empty());
}

TEST_CASE("A failed worker restarts the generation on the same node, and the job succeeds") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {"--max_restarts", "2"},
                             {"--fail_rank", "1", "--exit_code", "3", "--until_generation", "1"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: generation 0: rank 1 on host localhost exited with exit code 3; restarting on the same 1 node (restart 1 of 2)\n"));
  // Generation 1's workers see the restart in the contract (env_check checks the aliases, among
  // them TORCHELASTIC_RUN_ID = DSLAUNCH_JOB_ID and ROLE_RANK = RANK).
  CHECK(Contains(r.out, "[rank 0] rank 0 of 2: generation 1 ok\n"));
  CHECK(Contains(r.out, "[rank 1] rank 1 of 2: generation 1 ok\n"));
  CheckNoWorkerAlive(dir.path(), 4);
  // Each generation has its own log files.
  std::string job_dir;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/logs")) job_dir = e.path().string();
  CHECK(std::filesystem::exists(job_dir + "/rank1.stderr.log"));
  CHECK(std::filesystem::exists(job_dir + "/rank1.gen1.stderr.log"));
}

TEST_CASE("Without --max_restarts the first failure ends the job as before generations existed") {
  TempDir dir;
  auto r = RunProcess(Launch(dir, {}, {"--fail_rank", "1", "--exit_code", "3", "--until_generation", "1"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_FALSE(Contains(r.err, "generation 1"));
  CHECK(Contains(r.err, "rank 1 on host localhost"));
  CheckNoWorkerAlive(dir.path(), 2);
}

TEST_CASE("A used-up restart budget ends the job with the last failure's code and every generation listed") {
  TempDir dir;
  // A different failure each time (exit code 10 + generation): not a repeat, so the budget runs out.
  auto r = RunProcess(Launch(dir, {"--max_restarts", "2"},
                             {"--fail_rank", "0", "--exit_code", "10", "--code_plus_generation"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 12);
  CHECK(Contains(r.err, "dslaunch: generation 0 on localhost: rank 0 on host localhost exited with exit code 10\n"));
  CHECK(Contains(r.err, "dslaunch: generation 1 on localhost: rank 0 on host localhost exited with exit code 11\n"));
  CHECK(Contains(r.err, "dslaunch: generation 2 on localhost: rank 0 on host localhost exited with exit code 12\n"));
  CheckNoWorkerAlive(dir.path(), 6);
}

TEST_CASE("The same failure in two generations in a row stops the job early with its traceback") {
  TempDir dir;
  const std::string script = dir.path() + "/train.py";
  std::ofstream(script) << "import os\n"
                           "if os.environ['RANK'] == '1':\n"
                           "    raise ValueError('bad learning rate in user code')\n";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2", "--nproc_per_node", "2",
                       "--max_restarts", "5", script},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  // Two generations ran, not six.
  CHECK(Contains(r.err, "dslaunch: generation 1 on localhost:"));
  CHECK_FALSE(Contains(r.err, "dslaunch: generation 2 on"));
  CHECK(Contains(r.err, "ValueError: bad learning rate in user code"));
  CHECK(Contains(r.err, "the same failure as in generation 0 (same rank, exit status, message and step, on the same nodes): stopping early"));
}

TEST_CASE("A SIGTERM to the launcher ends a restartable job without a restart") {
  TempDir dir;
  Subprocess launcher(Launch(dir, {"--max_restarts", "3"}, {"--hang"}));
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  launcher.Signal(SIGTERM);
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK_FALSE(Contains(r.err, "generation 1"));
  CheckNoWorkerAlive(dir.path(), 2);
}

}  // namespace
}  // namespace dslaunch::testing
