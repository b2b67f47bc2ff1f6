// A swap file left by a process killed with SIGKILL (no destructor ran) is found and removed by the
// next start's sweep (docs/offload.md): the one swap case that needs a real process to die.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/swap/swap_directory.h"
#include "runtime/swap/swap_file.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime::swap {
namespace {

using testing::TempDir;

TEST_CASE("The swap file of a killed process is removed at the next start") {
  TempDir dir("/var/tmp");
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 2, 4096, 4});
    ::raise(SIGKILL);  // a crash: no destructor runs
    ::_exit(1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  std::string left = SwapDirectory(dir.path()) + "/optimizer.rank2.pid" + std::to_string(child) + ".swp";
  REQUIRE(std::filesystem::exists(left));
  auto removed = RemoveStaleSwapFiles(dir.path());
  REQUIRE(removed.ok());
  REQUIRE(removed->size() == 1);
  CHECK((*removed)[0].path == left);
  CHECK((*removed)[0].bytes == 4 * 4096);
  CHECK_FALSE(std::filesystem::exists(left));
}

}  // namespace
}  // namespace dslaunch::runtime::swap
