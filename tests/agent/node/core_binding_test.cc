// Core binding (agent/node/core_binding.h, agent/node/cpu_topology.h): the split between local ranks on
// made-up layouts, and the sysfs reader on a fake tree.
#include "agent/node/core_binding.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/node/cpu_topology.h"
#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

std::vector<int> Range(int first, int last) {
  std::vector<int> v;
  for (int i = first; i <= last; ++i) v.push_back(i);
  return v;
}

// Two sockets of 4 cores with 2 threads each, Linux numbering: NUMA node 0 holds cores 0-3 and
// their siblings 8-11, node 1 holds 4-7 and 12-15.
CpuLayout TwoNumaNodes() {
  CpuLayout l;
  l.allowed = Range(0, 15);
  l.numa_nodes[0] = {0, 1, 2, 3, 8, 9, 10, 11};
  l.numa_nodes[1] = {4, 5, 6, 7, 12, 13, 14, 15};
  for (int cpu = 0; cpu < 8; ++cpu) {
    l.core_of[cpu] = cpu;
    l.core_of[cpu + 8] = cpu;
  }
  return l;
}

TEST_CASE("SplitCores gives equal runs of physical cores, each inside one NUMA node where it fits") {
  const CpuLayout l = TwoNumaNodes();
  struct Row {
    int ranks;
    std::vector<RankCores> expected;
  };
  for (const Row& row : {
           Row{1, {{Range(0, 7), std::nullopt}}},  // both nodes: memory left alone
           Row{2, {{Range(0, 3), 0}, {Range(4, 7), 1}}},
           Row{4, {{{0, 1}, 0}, {{2, 3}, 0}, {{4, 5}, 1}, {{6, 7}, 1}}},
           Row{3, {{{0, 1}, 0}, {{2, 3}, 0}, {{4, 5}, 1}}},  // 8 / 3 = 2 each, cores 6-7 unused
           Row{8, {{{0}, 0}, {{1}, 0}, {{2}, 0}, {{3}, 0}, {{4}, 1}, {{5}, 1}, {{6}, 1}, {{7}, 1}}},
       }) {
    CAPTURE(row.ranks);
    auto split = SplitCores(l, std::nullopt, row.ranks);
    REQUIRE(split.ok());
    CHECK(*split == row.expected);
  }
}

TEST_CASE("SplitCores groups by NUMA node when the numbering interleaves the nodes") {
  // Some machines number CPUs round-robin over the sockets: node 0 has the even ones.
  CpuLayout l;
  l.allowed = Range(0, 7);
  l.numa_nodes[0] = {0, 2, 4, 6};
  l.numa_nodes[1] = {1, 3, 5, 7};
  auto split = SplitCores(l, std::nullopt, 2);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{0, 2, 4, 6}, 0}, {{1, 3, 5, 7}, 1}});
}

TEST_CASE("SplitCores uses only the agent's affinity, one thread per core") {
  CpuLayout l = TwoNumaNodes();
  l.allowed = {2, 3, 10, 11, 12};  // a cpuset: two cores of node 0 with their siblings, one thread of core 4
  auto split = SplitCores(l, std::nullopt, 3);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{2}, 0}, {{3}, 0}, {{12}, 1}});
}

TEST_CASE("SplitCores on a machine with one memory domain binds no memory") {
  CpuLayout l;
  l.allowed = {0, 1};
  l.numa_nodes[0] = {0, 1};
  auto split = SplitCores(l, std::nullopt, 2);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{0}, std::nullopt}, {{1}, std::nullopt}});
  l.numa_nodes.clear();  // no sysfs: unknown
  split = SplitCores(l, std::nullopt, 1);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{0, 1}, std::nullopt}});
}

TEST_CASE("SplitCores cuts a --bind_core_list in its own order, hardware threads included") {
  const CpuLayout l = TwoNumaNodes();
  auto split = SplitCores(l, std::vector<int>{0, 1, 2, 3, 8, 10, 11}, 2);  // "0-3,8,10-11"
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{0, 1, 2}, 0}, {{3, 8, 10}, 0}});
  split = SplitCores(l, std::vector<int>{3, 4}, 2);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{3}, 0}, {{4}, 1}});
  split = SplitCores(l, std::vector<int>{3, 4}, 1);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{3, 4}, std::nullopt}});  // spans both nodes
}

TEST_CASE("SplitCores refuses fewer cores than ranks and CPUs outside the affinity, naming them") {
  CpuLayout l;
  l.allowed = {0, 1};
  auto few = SplitCores(l, std::nullopt, 3);
  REQUIRE_FALSE(few.ok());
  CHECK(few.status().message() ==
        "--bind_cores_to_rank: 3 local ranks but 2 usable cores (0-1, one thread per core) on this node; each rank "
        "needs at least one: run fewer ranks per node or give more cores");
  auto short_list = SplitCores(l, std::vector<int>{1}, 2);
  REQUIRE_FALSE(short_list.ok());
  CHECK(short_list.status().message() ==
        "--bind_core_list '1': 2 local ranks but 1 usable core (1) on this node; each rank needs at least one: run "
        "fewer ranks per node or give more cores");
  auto outside = SplitCores(l, std::vector<int>{1, 2, 3}, 1);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().code() == StatusCode::kInvalidArgument);
  CHECK(outside.status().message() ==
        "--bind_core_list '1-3': CPUs 2-3 outside the agent's CPU affinity (0-1) on this node; list only CPUs of "
        "that set");
}

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST_CASE("ReadCpuLayout reads NUMA nodes and thread siblings from a sysfs tree") {
  testing::TempDir sys;
  // Two NUMA nodes and a memory-only one (an HBM or CXL node has an empty cpulist).
  Write(sys.path() + "/node/node0/cpulist", "0-1,4-5\n");
  Write(sys.path() + "/node/node1/cpulist", "2-3,6-7\n");
  Write(sys.path() + "/node/node2/cpulist", "\n");
  Write(sys.path() + "/node/online", "0-2\n");
  Write(sys.path() + "/node/possible", "0-3\n");
  for (int cpu = 0; cpu < 8; ++cpu) {
    const int core = cpu % 4;
    Write(sys.path() + "/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
          std::to_string(core) + "," + std::to_string(core + 4) + "\n");
  }
  auto layout = ReadCpuLayout(sys.path(), Range(0, 7));
  REQUIRE(layout.ok());
  CHECK(layout->numa_nodes == std::map<int, std::vector<int>>{{0, {0, 1, 4, 5}}, {1, {2, 3, 6, 7}}, {2, {}}});
  CHECK(layout->core_of.at(5) == 1);
  CHECK(layout->core_of.at(2) == 2);
  auto split = SplitCores(*layout, std::nullopt, 2);
  REQUIRE(split.ok());
  CHECK(*split == std::vector<RankCores>{{{0, 1}, 0}, {{2, 3}, 1}});

  testing::TempDir empty;  // a container without sysfs: one domain, every CPU its own core
  auto bare = ReadCpuLayout(empty.path(), {0, 1});
  REQUIRE(bare.ok());
  CHECK(bare->numa_nodes.empty());
  CHECK(bare->core_of.empty());

  Write(sys.path() + "/node/node1/cpulist", "garbage\n");
  auto bad = ReadCpuLayout(sys.path(), Range(0, 7));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == sys.path() + "/node/node1/cpulist: 'garbage': not a CPU number");
}

TEST_CASE("ReadOwnAffinity lists the CPUs this process may run on") {
  auto cpus = ReadOwnAffinity();
  REQUIRE(cpus.ok());
  CHECK_FALSE(cpus->empty());
  CHECK(std::is_sorted(cpus->begin(), cpus->end()));
}

}  // namespace
}  // namespace dslaunch::agent
