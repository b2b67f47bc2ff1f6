// Cluster tests of fault tolerance (docs/elastic.md): real sshd in network namespaces, the real
// dslaunch over libssh, a node cut off with `ip link set ... down`.
#include <dirent.h>
#include <doctest/doctest.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include "common/exit_codes.h"
#include "tests/support/cluster.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
constexpr std::chrono::seconds kRunTimeout{120};

std::vector<std::string> Launch(const Cluster& c, const TempDir& dir, const std::string& job_id,
                                std::vector<std::string> options, std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "1",
                                   "--heartbeat_timeout", "2", "--job_id", job_id};
  for (auto& o : c.SshOptions()) argv.push_back(o);
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

// Every process on this machine (the namespaces share its PID space) that belongs to the job:
// agents carry the job id on their command line, workers in their environment.
std::vector<pid_t> JobProcesses(const std::string& job_id) {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    const std::string cmdline = ReadWhole(base + "/cmdline");
    if (cmdline.substr(0, cmdline.find('\0')) == kLauncher) continue;  // the launcher itself
    if (Contains(cmdline, job_id) || Contains(ReadWhole(base + "/environ"), "DSLAUNCH_JOB_ID=" + job_id)) {
      if (ProcessAlive(static_cast<pid_t>(pid))) pids.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(d);
  return pids;
}

size_t PidFilesOf(const TempDir& dir, int generation) {
  size_t n = 0;
  const std::string tag = generation > 0 ? ".gen" + std::to_string(generation) + ".pid" : ".pid";
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (name.size() > tag.size() && name.compare(name.size() - tag.size(), tag.size(), tag) == 0 &&
        (generation > 0 || name.find(".gen") == std::string::npos)) {
      ++n;
    }
  }
  return n;
}

TEST_CASE("A node cut off mid-job is replaced by the spare and the job completes") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "elastic-spare";
  // Nodes 0-2 run, node 3 waits as the spare; generation 0 hangs until a node is lost.
  Subprocess launcher(Launch(*c, dir, job, {"--nnodes", "3:3", "--max_restarts", "2"},
                             {"--hang", "--until_generation", "1", "--expect_world", "6"}));
  REQUIRE(WaitFor([&] { return PidFilesOf(dir, 0) == 6; }, std::chrono::seconds(60)));
  LinkGuard guard(*c, 1);
  REQUIRE(SetLink(*c, 1, false));
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: generation 0: node " + c->Addr(1) + " lost (no heartbeat for "));
  CHECK(Contains(r.err, c->Addr(3)));
  // The spare took node 1's place: its ranks 2 and 3 run there now.
  CHECK(Contains(r.out, "[rank 2 " + c->Addr(3) + "] rank 2 of 6: generation 1 ok\n"));
  CHECK(Contains(r.out, "[rank 5 " + c->Addr(2) + "] rank 5 of 6: generation 1 ok\n"));
  SetLink(*c, 1, true);
  // Node 1's agent stops its workers once it misses the launcher's heartbeats.
  CHECK(WaitFor([&] { return JobProcesses(job).empty(); }, std::chrono::seconds(20)));
}

TEST_CASE("An elastic job shrinks when a node is lost and takes the node back when it answers again") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "elastic-shrink";
  // Three candidates, at least two: no spare, so a loss shrinks the job. Generations 0 and 1 hang:
  // 0 until node 2 is lost, 1 until node 2 is back and the launcher scales up.
  Subprocess launcher(Launch(*c, dir, job, {"--num_nodes", "3", "--nnodes", "2:3", "--max_restarts", "1"},
                             {"--hang", "--until_generation", "2"}));
  REQUIRE(WaitFor([&] { return PidFilesOf(dir, 0) == 6; }, std::chrono::seconds(60)));
  {
    LinkGuard guard(*c, 2);
    REQUIRE(SetLink(*c, 2, false));
    REQUIRE(WaitFor([&] { return PidFilesOf(dir, 1) == 4; }, std::chrono::seconds(30)));
  }  // link back up
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: generation 0: node " + c->Addr(2) + " lost"));
  CHECK(Contains(r.err, "continuing on 2 nodes"));
  // The scale-up's line, and generation 1's line in the history at the end, say why once (the
  // root cause recorded is the reason, not the whole console line with its own prefix).
  const std::string back = "node " + c->Addr(2) +
                           " answers again; scaling up from 2 to 3 nodes at the next step boundary (not counted as a "
                           "restart)";
  CHECK(Contains(r.err, "dslaunch: generation 1: " + back + "\n"));
  CHECK(Contains(r.err, "dslaunch: generation 1 on " + c->Addr(0) + ", " + c->Addr(1) + ": " + back + "\n"));
  CHECK_FALSE(Contains(r.err, "dslaunch: generation 1: dslaunch:"));
  CHECK(Contains(r.out, "[rank 5 " + c->Addr(2) + "] rank 5 of 6: generation 2 ok\n"));
  CHECK(WaitFor([&] { return JobProcesses(job).empty(); }, std::chrono::seconds(20)));
}

TEST_CASE("DeepSpeed's --elastic_training with --max_elastic_nodes 3 runs on three of the four hosts") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  auto r = RunProcess(Launch(*c, dir, "elastic-deepspeed", {"--elastic_training", "--max_elastic_nodes", "3"},
                             {"--expect_world", "6", "--expect_nodes", "3"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "rank 5 of 6: environment ok\n"));
  CHECK_FALSE(Contains(r.out, "rank 6 of"));
}

TEST_CASE("An elastic job starts on the hosts that pass pre-flight and names the one that does not") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << c->Addr(0) << " slots=2\n172.30.77.99 slots=2\n" << c->Addr(1) << " slots=2\n";
  auto argv = Launch(*c, dir, "elastic-preflight",
                     {"--hostfile", hosts, "--ssh_connect_timeout", "1", "--nnodes", "2:3"}, {"--expect_world", "4"});
  auto r = RunProcess(argv, kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: pre-flight failed on node 1 (172.30.77.99): "));
  CHECK(Contains(r.err, "it stays out until it answers again"));
  CHECK(Contains(r.out, "[rank 3 " + c->Addr(1) + "] rank 3 of 4: environment ok\n"));
  // Without a range every host must pass: the same hostfile starts nothing.
  TempDir strict;
  auto s = RunProcess(Launch(*c, strict, "elastic-preflight-strict", {"--hostfile", hosts, "--ssh_connect_timeout", "1"},
                             {}),
                      kRunTimeout);
  CHECK(s.exit_code == kExitInfrastructure);
  CHECK(Contains(s.err, "nothing was started"));
}

// argv[0] of a process, "" if it is gone.
std::string Program(pid_t pid) {
  const std::string cmd = ReadWhole("/proc/" + std::to_string(pid) + "/cmdline");
  return cmd.substr(0, cmd.find('\0'));
}

// The processes of generation 0 of the job on node `node` (node ranks of generation 0 are the
// candidates' indices): the agent (dslaunch-agent ... --node_rank N) and its workers (env_check
// with NODE_RANK=N). Shells that start them are neither.
std::vector<pid_t> NodeProcesses(const std::string& job_id, int node) {
  std::vector<pid_t> out;
  for (pid_t pid : JobProcesses(job_id)) {
    const std::string base = "/proc/" + std::to_string(pid);
    std::string cmd = ReadWhole(base + "/cmdline");
    for (char& ch : cmd) ch = ch == '\0' ? ' ' : ch;
    std::string env = ReadWhole(base + "/environ");
    for (char& ch : env) ch = ch == '\0' ? '\n' : ch;
    const std::string program = Program(pid);
    if ((program == kBin + "/dslaunch-agent" && Contains(cmd, "--node_rank " + std::to_string(node) + " ")) ||
        (program == kEnvCheck && Contains("\n" + env, "\nNODE_RANK=" + std::to_string(node) + "\n"))) {
      out.push_back(pid);
    }
  }
  return out;
}

bool IsAgent(pid_t pid) { return Program(pid) == kBin + "/dslaunch-agent"; }

TEST_CASE("A stale worker of an old generation cannot touch the new generation's store") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "elastic-stale-" + std::to_string(::getpid());
  const std::string probe = dir.path() + "/probe";
  // The launcher's own fence, so the workers connect to it directly: through the proxy (the
  // default) the frozen agent would hold their calls, and the proxy's fence is tested in
  // tests/launcher/store_proxy_proc_test.cc.
  Subprocess launcher(Launch(*c, dir, job, {"--nnodes", "3:3", "--max_restarts", "1", "--store_proxy", "off"},
                             {"--stale_probe", probe, "--hang"}));
  REQUIRE(WaitFor([&] { return PidFilesOf(dir, 0) == 6; }, std::chrono::seconds(60)));
  std::vector<pid_t> agents, workers;
  for (pid_t p : NodeProcesses(job, 2)) (IsAgent(p) ? agents : workers).push_back(p);
  REQUIRE(agents.size() == 1);
  REQUIRE(workers.size() == 2);
  // However the test ends, nothing it froze stays frozen.
  struct Thaw {
    std::vector<pid_t> pids;
    ~Thaw() {
      for (pid_t p : pids) ::kill(p, SIGKILL);
    }
  } thaw{NodeProcesses(job, 2)};
  // Node 2 is partitioned and frozen: its agent can neither stop its workers nor be killed by the
  // launcher. The launcher loses it and goes on with the spare.
  for (pid_t p : agents) ::kill(p, SIGSTOP);
  for (pid_t p : workers) ::kill(p, SIGSTOP);
  {
    LinkGuard guard(*c, 2);
    REQUIRE(SetLink(*c, 2, false));
    REQUIRE(WaitFor([&] { return PidFilesOf(dir, 1) == 6; }, std::chrono::seconds(30)));
  }  // the link is back
  // Generation 0's workers on node 2 run again: they try their old connection and a new one. The
  // launcher's kill of their agent, sent while the link was down, may reach the node first (TCP
  // retransmits it once the link is up): then they die with their agent (PR_SET_PDEATHSIG) before
  // they can try, which is safe too. Either way no stale worker may get through.
  for (pid_t p : workers) ::kill(p, SIGCONT);
  auto stale_dead = [&] {
    for (pid_t p : workers) {
      if (ProcessAlive(p)) return false;
    }
    return true;
  };
  REQUIRE(WaitFor([&] { return Contains(ReadWhole(probe), "connect:") || stale_dead(); }, std::chrono::seconds(15)));
  for (pid_t p : agents) ::kill(p, SIGCONT);
  const std::string result = ReadWhole(probe);
  INFO(result);
  if (result.empty()) {
    MESSAGE("the stale workers died with their agent before they could try the store");
  } else {
    CHECK_FALSE(Contains(result, "set: OK"));
    CHECK(Contains(result, "connect: aborted: "));
    CHECK(Contains(result, "generation 0 of job '" + job + "' is over (the job is at generation 1)"));
  }
  launcher.Signal(SIGTERM);
  auto r = launcher.Wait(kRunTimeout);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(WaitFor([&] { return JobProcesses(job).empty(); }, std::chrono::seconds(20)));
}

TEST_CASE("SIGKILL of the launcher in the middle of a restart leaves nothing on any node") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "elastic-kill";
  Subprocess launcher(Launch(*c, dir, job, {"--max_restarts", "3"},
                             {"--fail_rank", "3", "--exit_code", "4", "--code_plus_generation", "--ignore_sigterm"}));
  // The first workers of generation 1 are up: the restart is under way.
  REQUIRE(WaitFor([&] { return PidFilesOf(dir, 1) >= 1; }, std::chrono::seconds(60)));
  launcher.Signal(SIGKILL);
  launcher.Wait(kRunTimeout);
  // Agents see the connection close at once; the grace period is 1 s, then SIGKILL.
  CHECK(WaitFor([&] { return JobProcesses(job).empty(); }, std::chrono::seconds(15)));
  CHECK(JobProcesses(job).empty());
}

}  // namespace
}  // namespace dslaunch::testing
