#include "launcher/slurm/allocation.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

using Env = std::map<std::string, std::string>;

SlurmAllocation Read(const Env& env) {
  auto a = ReadSlurmAllocation(env);
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  REQUIRE(a->has_value());
  return **a;
}

std::string ErrorOf(const Env& env) {
  auto a = ReadSlurmAllocation(env);
  REQUIRE(!a.ok());
  CHECK(a.status().code() == StatusCode::kInvalidArgument);
  return a.status().message();
}

std::vector<int> Slots(const Hostfile& h) {
  std::vector<int> out;
  for (const HostEntry& e : h.hosts) out.push_back(e.slots);
  return out;
}

TEST_CASE("ReadSlurmAllocation is nullopt outside an allocation") {
  auto none = ReadSlurmAllocation({{"SLURM_JOB_NODELIST", "a[1-2]"}});
  REQUIRE(none.ok());
  CHECK(!none->has_value());
  auto empty = ReadSlurmAllocation({{"SLURM_JOB_ID", ""}});
  REQUIRE(empty.ok());
  CHECK(!empty->has_value());
}

TEST_CASE("ReadSlurmAllocation reads what salloc -N3 sets") {
  SlurmAllocation a = Read({{"SLURM_JOB_ID", "42"},
                            {"SLURM_JOB_NODELIST", "n[01-02],gpu7"},
                            {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                            {"SLURM_JOB_CPUS_PER_NODE", "8(x3)"},
                            {"SLURM_RESTART_COUNT", "2"}});
  CHECK(a.job_id == "42");
  CHECK(a.nodes == std::vector<std::string>{"n01", "n02", "gpu7"});
  CHECK(a.tasks_per_node == std::vector<int>{2, 2, 1});
  CHECK(a.cpus_per_node == std::vector<int>{8, 8, 8});
  CHECK(a.restart_count == 2);
  CHECK(!a.gpus_on_node);
  CHECK(!a.ntasks_per_node);
}

TEST_CASE("ReadSlurmAllocation falls back to SLURM_NODELIST and treats SLURM_GPUS_ON_NODE=0 as no GPUs") {
  SlurmAllocation a = Read({{"SLURM_JOB_ID", "1"}, {"SLURM_NODELIST", "x"}, {"SLURM_GPUS_ON_NODE", "0"}});
  CHECK(a.nodes == std::vector<std::string>{"x"});
  CHECK(!a.gpus_on_node);
  CHECK(a.restart_count == 0);
}

TEST_CASE("ReadSlurmAllocation names the variable that is wrong") {
  CHECK(ErrorOf({{"SLURM_JOB_ID", "7"}}).find("SLURM_JOB_NODELIST is not") != std::string::npos);
  std::string bad_list = ErrorOf({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[3-1]"}});
  CHECK(bad_list.find("SLURM_JOB_NODELIST='n[3-1]'") != std::string::npos);
  std::string mismatch =
      ErrorOf({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  CHECK(mismatch.find("SLURM_TASKS_PER_NODE='2(x2)': lists 2 nodes, SLURM_JOB_NODELIST 3") != std::string::npos);
  for (const char* name : {"SLURM_GPUS_ON_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_RESTART_COUNT"}) {
    CAPTURE(name);
    std::string e = ErrorOf({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n1"}, {name, "two"}});
    CHECK(e.find(std::string(name) + "='two': expected an integer") != std::string::npos);
  }
  CHECK(ErrorOf({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_NTASKS_PER_NODE", "0"}})
            .find(">= 1") != std::string::npos);
  CHECK(ErrorOf({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_CPUS_PER_NODE", "x"}})
            .find("SLURM_JOB_CPUS_PER_NODE='x'") != std::string::npos);
}

TEST_CASE("AllocationHostfile takes slots from --nproc_per_node, GPUs, tasks per node, in that order") {
  SlurmAllocation a = Read({{"SLURM_JOB_ID", "9"},
                            {"SLURM_JOB_NODELIST", "n[1-3]"},
                            {"SLURM_TASKS_PER_NODE", "3,2(x2)"},
                            {"SLURM_NTASKS_PER_NODE", "4"},
                            {"SLURM_GPUS_ON_NODE", "8"}});
  std::string source;
  Hostfile h = AllocationHostfile(a, 2, &source);
  CHECK(Slots(h) == std::vector<int>{2, 2, 2});
  CHECK(source == "--nproc_per_node");
  CHECK(h.hosts[2].host == "n3");
  CHECK(h.path == "SLURM_JOB_NODELIST");
  CHECK(Slots(AllocationHostfile(a, std::nullopt, &source)) == std::vector<int>{8, 8, 8});
  CHECK(source == "SLURM_GPUS_ON_NODE");
  a.gpus_on_node.reset();
  CHECK(Slots(AllocationHostfile(a, std::nullopt, &source)) == std::vector<int>{4, 4, 4});
  CHECK(source == "SLURM_NTASKS_PER_NODE");
  a.ntasks_per_node.reset();
  CHECK(Slots(AllocationHostfile(a, std::nullopt, &source)) == std::vector<int>{3, 2, 2});
  CHECK(source == "SLURM_TASKS_PER_NODE");
  a.tasks_per_node.clear();
  CHECK(Slots(AllocationHostfile(a, std::nullopt, &source)) == std::vector<int>{1, 1, 1});
}

TEST_CASE("ParseLauncherKind accepts slurm, ssh and local only") {
  CHECK(*ParseLauncherKind("slurm") == LauncherKind::kSlurm);
  CHECK(*ParseLauncherKind("ssh") == LauncherKind::kSsh);
  CHECK(*ParseLauncherKind("local") == LauncherKind::kLocal);
  auto bad = ParseLauncherKind("srun");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--launcher 'srun': expected slurm, ssh or local");
}

TEST_CASE("ChooseLauncher: srun inside a multi-node allocation, the hostfile when one is given") {
  SlurmAllocation two = Read({{"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  SlurmAllocation one = Read({{"SLURM_JOB_ID", "6"}, {"SLURM_JOB_NODELIST", "n1"}});
  struct Row {
    const char* name;
    LauncherInputs in;
    LauncherKind kind;
    bool from_slurm;
  };
  const Row rows[] = {
      {"outside Slurm, no hostfile", {std::nullopt, false, nullptr, false}, LauncherKind::kLocal, false},
      {"outside Slurm, a hostfile", {std::nullopt, true, nullptr, false}, LauncherKind::kSsh, false},
      {"two nodes", {std::nullopt, false, &two, false}, LauncherKind::kSlurm, true},
      {"two nodes and a hostfile", {std::nullopt, true, &two, false}, LauncherKind::kSsh, false},
      {"one node elsewhere", {std::nullopt, false, &one, false}, LauncherKind::kSlurm, true},
      {"one node, this machine", {std::nullopt, false, &one, true}, LauncherKind::kLocal, true},
      {"--launcher slurm on this machine", {LauncherKind::kSlurm, false, &one, true}, LauncherKind::kSlurm, true},
      {"--launcher ssh to the allocation", {LauncherKind::kSsh, false, &two, false}, LauncherKind::kSsh, true},
      {"--launcher slurm with a hostfile", {LauncherKind::kSlurm, true, &two, false}, LauncherKind::kSlurm, false},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    auto c = ChooseLauncher(row.in);
    REQUIRE(c.ok());
    CHECK(c->kind == row.kind);
    CHECK(c->nodes_from_slurm == row.from_slurm);
    CHECK(!c->why.empty());
  }
}

TEST_CASE("ChooseLauncher refuses --launcher slurm outside an allocation") {
  auto c = ChooseLauncher({LauncherKind::kSlurm, true, nullptr, false});
  REQUIRE(!c.ok());
  CHECK(c.status().message().find("needs a Slurm allocation (SLURM_JOB_ID is not set)") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::launcher
