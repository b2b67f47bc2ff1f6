#include "common/process_tree.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>

#include "common/heartbeat.h"

namespace dslaunch {
namespace {

TEST_CASE("DescendantsOf finds children, grandchildren and re-parented orphans, and only live ones") {
  // 100 is the agent. 200 is a worker; 201 its child; 300 an orphan that called setsid and was
  // re-parented to the agent (a subreaper); 301 a zombie child of 300; 302 a child of the zombie
  // (impossible for long, but the walk must not stop at a zombie). 400 belongs to someone else,
  // and 1 is init.
  std::vector<ProcessEntry> table = {
      {1, 0, 1, false},     {100, 1, 100, false}, {200, 100, 200, false}, {201, 200, 200, false},
      {300, 100, 300, false}, {301, 300, 300, true},  {302, 301, 300, false}, {400, 1, 400, false},
  };
  std::vector<pid_t> d = DescendantsOf(100, table);
  auto at = [&](pid_t p) { return std::find(d.begin(), d.end(), p) - d.begin(); };
  CHECK(at(200) < at(201));  // parents before their children
  CHECK(at(300) < at(302));
  std::sort(d.begin(), d.end());
  CHECK(d == std::vector<pid_t>{200, 201, 300, 302});
  CHECK(DescendantsOf(200, table) == std::vector<pid_t>{201});
  CHECK(DescendantsOf(400, table).empty());
  CHECK(DescendantsOf(999, table).empty());
}

TEST_CASE("DescendantsOf terminates on a table with a cycle or a self-parent") {
  std::vector<ProcessEntry> table = {{5, 5, 5, false}, {6, 7, 6, false}, {7, 6, 7, false}, {8, 5, 8, false}};
  CHECK(DescendantsOf(5, table) == std::vector<pid_t>{8});
  // A table read while pids are recycled may hold a cycle; the walk visits each pid once.
  CHECK(DescendantsOf(6, table) == std::vector<pid_t>{7});
}

TEST_CASE("ReadProcessTable sees this process with its real parent and group") {
  auto table = ReadProcessTable();
  REQUIRE(table.ok());
  auto self = std::find_if(table->begin(), table->end(), [](const ProcessEntry& e) { return e.pid == ::getpid(); });
  REQUIRE(self != table->end());
  CHECK(self->parent == ::getppid());
  CHECK(self->group == ::getpgrp());
  CHECK_FALSE(self->zombie);
}

TEST_CASE("A checker that ran a whole timeout after its previous check was itself suspended") {
  using namespace std::chrono_literals;
  const auto t0 = std::chrono::steady_clock::time_point{} + 100s;
  CHECK_FALSE(CheckerWasSuspended(t0, t0 + 1s, 10s));
  CHECK_FALSE(CheckerWasSuspended(t0, t0 + 9999ms, 10s));
  CHECK(CheckerWasSuspended(t0, t0 + 10s, 10s));
  CHECK(CheckerWasSuspended(t0, t0 + 60s, 10s));
}

}  // namespace
}  // namespace dslaunch
