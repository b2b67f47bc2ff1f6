// Settings end to end (docs/testing.md, "Settings end to end"): dslaunch options given on the real
// launcher's command line, each observed where it acts (the agent, the workers' environment, the
// console, the files, the launcher's exit). The other options' tests are named in
// tests/settings/settings.txt.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

namespace fs = std::filesystem;

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// Hang guard for one launcher run; the jobs themselves take about a second.
constexpr std::chrono::seconds kRunTimeout{90};

std::vector<std::string> Job(const TempDir& dir, std::vector<std::string> options, const std::string& script,
                             const std::string& job_id = "settings") {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--job_id", job_id};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", "/bin/bash", "-c", script});
  return argv;
}

TEST_CASE("--watchdog_timeout reaches the agents: a rank that reports progress without a timeout and hangs is "
          "killed after that many seconds") {
  TempDir dir;
  // The rank asks for no watchdog itself (no timeout= in its report): only the launcher's option
  // can make the agent watch it. It also gets the value as DSLAUNCH_WATCHDOG_TIMEOUT.
  auto r = RunProcess(Job(dir, {"--watchdog_timeout", "1.5", "--grace_period", "2"},
                          "echo \"timeout is $DSLAUNCH_WATCHDOG_TIMEOUT\"; echo 0 > \"$DSLAUNCH_PROGRESS_FILE\"; "
                          "sleep 60"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 137);
  CHECK(r.seconds < 30);
  CHECK(Contains(r.out, "[rank 0] timeout is 1.5\n"));
  CHECK(std::regex_search(r.err, std::regex("rank 0 reported no progress for [0-9.]+ s \\(last step 0, watchdog "
                                            "timeout 1\\.5 s\\)")));
  // Without the option the same rank is not watched: it runs until its own end.
  TempDir quiet;
  auto q = RunProcess(Job(quiet, {}, "echo 0 > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 3; echo done"), kRunTimeout);
  INFO(q.err);
  CHECK(q.exit_code == 0);
  CHECK(Contains(q.out, "[rank 0] done\n"));
}

// A worker script that writes its pid to `pid_file` and then ignores SIGTERM, forever.
std::string IgnoresTerm(const std::string& pid_file) {
  return "trap '' TERM; echo $$ > " + pid_file + "; while :; do sleep 0.1; done";
}

// The pid a worker wrote to `pid_file`, once it has.
pid_t WorkerPid(const std::string& pid_file) {
  REQUIRE(WaitFor([&] { return fs::exists(pid_file) && fs::file_size(pid_file) > 0; }, std::chrono::seconds(30)));
  return std::stoi(ReadWhole(pid_file));
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_CASE("--grace_period: a worker that ignores SIGTERM is killed that many seconds after the launcher is told "
          "to stop") {
  TempDir dir;
  const std::string pid = dir.path() + "/worker.pid";
  // The default grace period is 30 s: a job that ends within 10 s ended by the option's 1 s.
  Subprocess launcher(Job(dir, {"--grace_period", "1"}, IgnoresTerm(pid)));
  const pid_t worker = WorkerPid(pid);
  const auto asked = std::chrono::steady_clock::now();
  launcher.Signal(SIGTERM);
  auto r = launcher.Wait(kRunTimeout);
  const double seconds = SecondsSince(asked);
  INFO(r.err);
  CHECK(r.exit_code == 143);  // 128 + SIGTERM: the job was stopped
  CHECK(seconds >= 1.0);
  CHECK(seconds < 10);
  CHECK_FALSE(ProcessAlive(worker));

  // The agents keep the job's grace period for a stop of their own too: a launcher killed with
  // SIGKILL cannot stop its workers, so its agent does (the job cannot restart: the whole grace
  // period, which the launcher handed over in the assignment).
  TempDir own;
  const std::string own_pid = own.path() + "/worker.pid";
  Subprocess job(Job(own, {"--grace_period", "1"}, IgnoresTerm(own_pid)));
  const pid_t own_worker = WorkerPid(own_pid);
  const auto killed = std::chrono::steady_clock::now();
  job.Signal(SIGKILL);
  REQUIRE(WaitFor([&] { return !ProcessAlive(own_worker); }, std::chrono::seconds(20)));
  const double own_seconds = SecondsSince(killed);
  CHECK(own_seconds >= 1.0);
  CHECK(own_seconds < 10);
}

TEST_CASE("--master_port reaches the workers' MASTER_PORT") {
  TempDir dir;
  auto r = RunProcess(Job(dir, {"--master_port", "23456", "--nproc_per_node", "2"}, "echo port $MASTER_PORT"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 0] port 23456\n"));
  CHECK(Contains(r.out, "[rank 1] port 23456\n"));
}

TEST_CASE("--no_tee keeps every worker stream off the console; the log files get them") {
  TempDir dir;
  auto r = RunProcess(Job(dir, {"--no_tee", "--nproc_per_node", "2"}, "echo out $RANK; echo err $RANK >&2"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK_FALSE(Contains(r.err, "[rank"));
  CHECK(ReadWhole(dir.path() + "/logs/settings/rank1.stdout.log") == "out 1\n");
  CHECK(ReadWhole(dir.path() + "/logs/settings/rank1.stderr.log") == "err 1\n");
}

TEST_CASE("--enable_each_rank_log DIR writes each rank's output under DIR and not to the console") {
  TempDir dir;
  const std::string each = dir.path() + "/each";
  auto r = RunProcess({kLauncher, "--enable_each_rank_log", each, "--job_id", "each", "--nproc_per_node", "2",
                       "--no_python", "/bin/bash", "-c", "echo hi $RANK"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(ReadWhole(each + "/each/rank0.stdout.log") == "hi 0\n");
  CHECK(ReadWhole(each + "/each/rank1.stdout.log") == "hi 1\n");
}

TEST_CASE("--save_pid FILE holds the launcher's pid while the job runs") {
  TempDir dir;
  const std::string pid_file = dir.path() + "/launcher.pid";
  const std::string ran = dir.path() + "/ran";
  Subprocess launcher(Job(dir, {"--save_pid=" + pid_file}, "touch " + ran + "; sleep 60"));
  REQUIRE(WaitFor([&] { return fs::exists(ran); }, std::chrono::seconds(30)));
  CHECK(ReadWhole(pid_file) == std::to_string(launcher.pid()) + "\n");
  launcher.Signal(SIGTERM);
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 143);
}

TEST_CASE("--exclude and -e drop hosts and slots from the plan") {
  TempDir dir;
  const std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "worker-0 slots=2\nworker-1 slots=2\n";
  auto whole = RunProcess({kLauncher, "-H", hosts, "--exclude", "worker-1", "--dry-run=json", "--no_python",
                           "/bin/true"},
                          kRunTimeout);
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  CHECK(Contains(whole.out, "\"world_size\": 2"));
  CHECK_FALSE(Contains(whole.out, "\"host\": \"worker-1\""));
  auto slot = RunProcess({kLauncher, "-H", hosts, "-e", "worker-0:1", "--dry-run=json", "--no_python", "/bin/true"},
                         kRunTimeout);
  INFO(slot.err);
  REQUIRE(slot.exit_code == 0);
  CHECK(Contains(slot.out, "\"world_size\": 3"));
  CHECK(Contains(slot.out, "\"host\": \"worker-1\""));
}

TEST_CASE("--standalone runs the job on this machine and refuses a hostfile") {
  TempDir dir;
  auto r = RunProcess(Job(dir, {"--standalone", "--nproc_per_node", "2"}, "echo world $WORLD_SIZE"), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 1] world 2\n"));
  const std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "worker-0 slots=2\n";
  auto refused = RunProcess({kLauncher, "--standalone", "-H", hosts, "--no_python", "/bin/true"}, kRunTimeout);
  CHECK(refused.exit_code == 2);
  CHECK(Contains(refused.err, "--standalone"));
}

TEST_CASE("Flags that change nothing here say so once on stderr, and the job runs: --start_method, "
          "--no_ssh_check, --force_multi, --comment, --local_addr") {
  TempDir dir;
  auto r = RunProcess(Job(dir, {"--start_method", "fork", "--no_ssh_check", "--force_multi", "--comment", "hi",
                                "--local_addr", "10.0.0.7"},
                          "echo ran"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] ran\n");
  for (const char* note : {"dslaunch: note: --start_method fork: ignored: every worker is a new process",
                           "dslaunch: note: --no_ssh_check: ignored: ", "dslaunch: note: --force_multi: ignored: ",
                           "dslaunch: note: --comment: ignored: ",
                           "dslaunch: note: --local_addr 10.0.0.7: ignored outside node mode"}) {
    CHECK_MESSAGE(Count(r.err, note) == 1, note);
  }
}

TEST_CASE("--launcher local starts the agents here and says so; --launcher slurm without an allocation is refused") {
  TempDir dir;
  auto r = RunProcess(Job(dir, {"--launcher", "local"}, "echo ran"), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: launcher local (--launcher local)\n"));
  CHECK(r.out == "[rank 0] ran\n");
  auto slurm = RunProcess({"/usr/bin/env", "-u", "SLURM_JOB_ID", kLauncher, "--launcher", "slurm", "--no_python",
                           "/bin/true"},
                          kRunTimeout);
  CHECK(slurm.exit_code == 2);
  CHECK(Contains(slurm.err, "--launcher slurm needs a Slurm allocation"));
}

TEST_CASE("dslaunch --help prints the usage and exits 0, starting nothing") {
  auto r = RunProcess({kLauncher, "--help"}, kRunTimeout);
  CHECK(r.exit_code == 0);
  CHECK(r.out.starts_with("Usage: dslaunch"));
  CHECK(Contains(r.out, "--watchdog_timeout"));
  auto v = RunProcess({kLauncher, "--version"}, kRunTimeout);
  CHECK(v.exit_code == 0);
  CHECK(v.out.starts_with("dslaunch "));
}

}  // namespace
}  // namespace dslaunch::testing
