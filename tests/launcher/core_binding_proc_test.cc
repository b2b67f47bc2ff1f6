// Proc tests: --bind_cores_to_rank through the real launcher and agent. Each worker is a shell
// that prints the CPUs it may run on (Cpus_allowed_list of /proc/self/status, what `taskset -p`
// reads) and its OMP_NUM_THREADS. The test runs the launcher on two CPUs of two different
// physical cores (its own affinity narrowed while it starts the launcher), so the expected split
// is the same on any machine: rank 0 on the first, rank 1 on the second.
#include <doctest/doctest.h>
#include <sched.h>

#include <fstream>
#include <sstream>

#include "common/cpu_list.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// Hang guard for one launcher run; the jobs themselves take well under a second.
constexpr std::chrono::seconds kRunTimeout{60};
// One line per worker: "rank=R cpus=LIST omp=N".
constexpr char kReport[] =
    "echo \"rank=$RANK cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) omp=$OMP_NUM_THREADS\"";

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

std::vector<int> OwnCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// The first CPU of this process's affinity and the next one on another physical core (not a
// thread sibling of the first, by sysfs; no sysfs: any other CPU).
std::pair<int, int> TwoCores() {
  const std::vector<int> cpus = OwnCpus();
  REQUIRE_MESSAGE(cpus.size() >= 2, "this test needs two CPUs in its affinity");
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpus[0]) + "/topology/thread_siblings_list");
  std::string text;
  std::getline(in, text);
  std::vector<int> siblings = {cpus[0]};
  if (auto parsed = ParseCpuList(text); parsed.ok() && !parsed->empty()) siblings = *parsed;
  for (int cpu : cpus) {
    if (std::find(siblings.begin(), siblings.end(), cpu) == siblings.end()) return {cpus[0], cpu};
  }
  FAIL("this test needs two CPUs of different physical cores in its affinity");
  return {};
}

// Runs the launcher with this thread's affinity narrowed to `cpus` (the launcher, its agent and
// the workers inherit it), then restores it.
ProcessResult RunOn(const std::vector<int>& cpus, std::vector<std::string> options,
                    const std::vector<std::string>& env = {}) {
  cpu_set_t old_set, narrow;
  REQUIRE(sched_getaffinity(0, sizeof(old_set), &old_set) == 0);
  CPU_ZERO(&narrow);
  for (int cpu : cpus) CPU_SET(cpu, &narrow);
  REQUIRE(sched_setaffinity(0, sizeof(narrow), &narrow) == 0);
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "OMP_NUM_THREADS"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {kLauncher, "--grace_period", "2"});
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", "/bin/sh", "-c", kReport});
  ProcessResult r = RunProcess(argv, kRunTimeout);
  REQUIRE(sched_setaffinity(0, sizeof(old_set), &old_set) == 0);
  return r;
}

std::string Line(int rank, const std::string& cpus, int omp) {
  return "rank=" + std::to_string(rank) + " cpus=" + cpus + " omp=" + std::to_string(omp) + "\n";
}

TEST_CASE("--bind_cores_to_rank puts each local rank on its own core with OMP_NUM_THREADS=1") {
  const auto [a, b] = TwoCores();
  const std::string both = FormatCpuList({a, b});
  auto bound = RunOn({a, b}, {"--nproc_per_node", "2", "--bind_cores_to_rank"});
  INFO(bound.out, bound.err);
  REQUIRE(bound.exit_code == 0);
  CHECK(Contains(bound.out, Line(0, std::to_string(a), 1)));
  CHECK(Contains(bound.out, Line(1, std::to_string(b), 1)));

  // Without the flag both ranks share both cores, and OMP_NUM_THREADS is cores / ranks.
  auto unbound = RunOn({a, b}, {"--nproc_per_node", "2"});
  REQUIRE(unbound.exit_code == 0);
  CHECK(Contains(unbound.out, Line(0, both, 1)));
  CHECK(Contains(unbound.out, Line(1, both, 1)));
  auto one = RunOn({a, b}, {"--nproc_per_node", "1"});
  REQUIRE(one.exit_code == 0);
  CHECK(Contains(one.out, Line(0, both, 2)));
}

TEST_CASE("--bind_core_list gives the listed cores, and a user's OMP_NUM_THREADS wins") {
  const auto [a, b] = TwoCores();
  auto listed = RunOn({a, b}, {"--nproc_per_node", "1", "--bind_cores_to_rank", "--bind_core_list", std::to_string(b)});
  INFO(listed.out, listed.err);
  REQUIRE(listed.exit_code == 0);
  CHECK(Contains(listed.out, Line(0, std::to_string(b), 1)));

  auto user = RunOn({a, b}, {"--nproc_per_node", "2", "--bind_cores_to_rank"}, {"OMP_NUM_THREADS=3"});
  REQUIRE(user.exit_code == 0);
  CHECK(Contains(user.out, Line(0, std::to_string(a), 3)));
  CHECK(Contains(user.out, Line(1, std::to_string(b), 3)));
}

TEST_CASE("A --bind_core_list with fewer cores than local ranks is refused before anything starts") {
  const auto [a, b] = TwoCores();
  auto r = RunOn({a, b}, {"--nproc_per_node", "2", "--bind_cores_to_rank", "--bind_core_list", std::to_string(b)});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(Contains(r.err, "dslaunch: --bind_core_list '" + std::to_string(b) +
                            "' gives 1 core but host 'localhost' runs 2 local ranks; each rank needs at least one "
                            "core: list more cores or run fewer ranks per node"));
  auto bad = RunOn({a, b}, {"--nproc_per_node", "2", "--bind_cores_to_rank", "--bind_core_list", "0-1,x"});
  CHECK(bad.exit_code == 2);
  CHECK(Contains(bad.err, "--bind_core_list '0-1,x': 'x': not a CPU number"));
}

TEST_CASE("More local ranks than usable cores stop the node with the agent's reason") {
  const auto [a, b] = TwoCores();
  auto r = RunOn({a, b}, {"--nproc_per_node", "3", "--bind_cores_to_rank"});
  INFO(r.out, r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());  // no worker started
  CHECK(Contains(r.err, "--bind_cores_to_rank: 3 local ranks but 2 usable cores (" + FormatCpuList({a, b}) +
                            ", one thread per core) on this node"));
}

}  // namespace
}  // namespace dslaunch::testing
