#include "launcher/machine/open_files_limit.h"

#include <sys/resource.h>

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

// Changes this test process's own limit: ctest runs every case in a process of its own.
TEST_CASE("RaiseOpenFilesLimit raises the soft limit to the hard one and returns the old one") {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  constexpr rlim_t kLow = 64;
  if (limit.rlim_max <= kLow) {
    MESSAGE("hard RLIMIT_NOFILE is " << limit.rlim_max << ": nothing to raise, skipped");
    return;
  }
  rlimit low{kLow, limit.rlim_max};
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  auto before = RaiseOpenFilesLimit();
  REQUIRE(before.ok());
  CHECK(before->soft == kLow);
  CHECK(before->hard == limit.rlim_max);
  rlimit now{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &now) == 0);
  CHECK(now.rlim_cur == limit.rlim_max);
  CHECK(now.rlim_max == limit.rlim_max);
  // Already at the hard limit: nothing changes.
  auto again = RaiseOpenFilesLimit();
  REQUIRE(again.ok());
  CHECK(again->soft == limit.rlim_max);
}

}  // namespace
}  // namespace dslaunch::launcher
