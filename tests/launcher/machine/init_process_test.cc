#include "launcher/machine/init_process.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

TEST_CASE("PID 1 ends with the launcher, with its exit code or 128+N for its signal, and not before") {
  CHECK_FALSE(OnReaped(10, 11, ExitStatus::Exited(0)).launcher_ended);  // an orphan
  CHECK_FALSE(OnReaped(10, 11, ExitStatus::Signaled(SIGKILL)).launcher_ended);
  InitReap exited = OnReaped(10, 10, ExitStatus::Exited(76));
  CHECK(exited.launcher_ended);
  CHECK(exited.exit_code == 76);
  InitReap killed = OnReaped(10, 10, ExitStatus::Signaled(SIGKILL));
  CHECK(killed.launcher_ended);
  CHECK(killed.exit_code == 137);
}

}  // namespace
}  // namespace dslaunch::launcher
