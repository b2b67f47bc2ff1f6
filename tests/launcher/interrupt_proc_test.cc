// Proc test: a second Ctrl-C (SIGINT) to the real launcher cuts the grace period short.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
// Hang guard for the launcher: far shorter than the job's grace period, so a launcher that waits
// the grace period out fails the test instead of passing late.
constexpr std::chrono::seconds kRunTimeout{60};
constexpr char kGracePeriodSeconds[] = "600";

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Kills the test's workers (each leads its own process group) if the launcher left them behind,
// so that a failing run does not leave them waiting out the grace period.
struct KillWorkersAtExit {
  const TempDir& dir;
  ~KillWorkersAtExit() {
    for (pid_t pid : ReadPidFiles(dir.path())) ::kill(-pid, SIGKILL);
  }
};

TEST_CASE("A second SIGINT to the launcher kills workers that ignore SIGTERM at once") {
  TempDir dir;
  KillWorkersAtExit cleanup{dir};
  // A worker that survives SIGTERM (says so in its log) and would run forever. The trap is set
  // before the pid file says the worker is ready: a SIGTERM in between would kill it outright.
  const std::string worker = dir.path() + "/stubborn.sh";
  std::ofstream(worker) << "#!/bin/sh\n"
                           "trap 'echo got TERM' TERM\n"
                           "echo $$ > " + dir.path() + "/rank$RANK.pid\n"
                           "while true; do sleep 0.05; done\n";
  std::filesystem::permissions(worker, std::filesystem::perms::owner_all);
  Subprocess launcher({kLauncher, "--nproc_per_node", "2", "--grace_period", kGracePeriodSeconds, "--log_dir",
                       dir.path() + "/logs", "--job_id", "int1", "--no_python", worker});
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(30)));
  launcher.Signal(SIGINT);
  // Both workers have been asked to stop and have refused.
  REQUIRE(WaitFor(
      [&] {
        for (int rank = 0; rank < 2; ++rank) {
          std::string log = ReadText(dir.path() + "/logs/int1/rank" + std::to_string(rank) + ".stdout.log");
          if (!Contains(log, "got TERM")) return false;
        }
        return true;
      },
      std::chrono::seconds(30)));
  launcher.Signal(SIGINT);
  ProcessResult r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 130);  // the first SIGINT stays the root cause
  CHECK(Contains(r.err, "dslaunch: interrupted again: killing every worker now (SIGKILL)"));
  CHECK(Contains(r.err, "the launcher received SIGINT"));
  for (pid_t pid : ReadPidFiles(dir.path())) {
    CAPTURE(pid);
    CHECK_FALSE(ProcessAlive(pid));
  }
}

}  // namespace
}  // namespace dslaunch::testing
