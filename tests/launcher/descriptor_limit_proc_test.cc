// Proc tests: a job whose connections cannot fit the launcher's descriptor limit is refused before
// anything starts (launcher/machine/connection_budget.h, docs/launcher.md "Descriptor limit"); a small job
// under the same limit runs. The limit is set with prlimit(1) for the launcher alone.
#include <unistd.h>

#include <doctest/doctest.h>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{60};
// Low enough that 300 local ranks on the direct path (300 + 1 agent + 64 margin + 4 + 256 reserved)
// do not fit, high enough for a two-rank job. (Through the store proxy, the default, the 300 ranks
// would need no connections of their own: connection_budget_test counts that case.)
constexpr char kNofile[] = "--nofile=500:500";

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST_CASE("A job whose connections exceed the descriptor limit is refused before any worker starts") {
  TempDir dir;
  const std::string marker = dir.path() + "/started";
  auto r = RunProcess({"/usr/bin/prlimit", kNofile, kLauncher, "--store_proxy", "off", "--nproc_per_node", "300",
                       "--no_python", "/usr/bin/touch", marker},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "300 ranks on 1 node need up to"));
  CHECK(Contains(r.err, "the launcher's descriptor limit is 500"));
  CHECK(Contains(r.err, "ulimit -n"));
  CHECK(Contains(r.err, "store proxy"));
  CHECK(::access(marker.c_str(), F_OK) != 0);  // no worker ran
}

TEST_CASE("A small job runs under the same descriptor limit") {
  auto r = RunProcess({"/usr/bin/prlimit", kNofile, kLauncher, "--store_proxy", "off", "--nproc_per_node", "2",
                       "--no_python", "/bin/true"},
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

}  // namespace
}  // namespace dslaunch::testing
