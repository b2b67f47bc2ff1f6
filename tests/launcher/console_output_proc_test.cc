// Proc tests of torchrun's and DeepSpeed's flags with the real dslaunch and dslaunch-agent
// (docs/cli.md, "Worker output" and "torchrun's and DeepSpeed's flags"): what the console shows of
// each local rank's streams, and the flags a copied command line brings with it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// Hang guard for one launcher run; the jobs themselves take well under a second.
constexpr std::chrono::seconds kRunTimeout{60};
// Each local rank writes one line to stdout and one to stderr.
const std::vector<std::string> kBothStreams = {"--no_python", "/bin/sh", "-c",
                                               "echo out $LOCAL_RANK; echo err $LOCAL_RANK >&2"};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

ProcessResult Run(const TempDir& dir, std::vector<std::string> options, const std::vector<std::string>& program) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--job_id", "console"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return RunProcess(argv, kRunTimeout);
}

std::string ReadLog(const TempDir& dir, const std::string& name) {
  std::ifstream f(dir.path() + "/logs/console/" + name);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

TEST_CASE("--tee 3 takes 3 as its value and runs the program after it") {
  TempDir dir;
  auto r = Run(dir, {"--tee", "3"}, {"--no_python", "/bin/echo", "hi"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] hi\n");
  // -t 3 and the per-rank form the same way.
  TempDir dir2;
  auto s = Run(dir2, {"-t", "0:3"}, {"--no_python", "/bin/echo", "hi"});
  INFO(s.err);
  CHECK(s.exit_code == 0);
  CHECK(s.out == "[rank 0] hi\n");
}

TEST_CASE("--redirects keeps streams off the console, --tee shows them again, per local rank; the logs get all") {
  TempDir dir;
  // Everything redirected; rank 0's stderr and rank 1's stdout teed back.
  auto r = Run(dir, {"--nproc_per_node", "2", "-r", "3", "--tee", "0:2,1:1"}, kBothStreams);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "[rank 1] out 1\n");
  CHECK(Contains(r.err, "[rank 0] err 0\n"));
  CHECK_FALSE(Contains(r.err, "err 1"));
  for (int rank : {0, 1}) {
    const std::string n = std::to_string(rank);
    CHECK(ReadLog(dir, "rank" + n + ".stdout.log") == "out " + n + "\n");
    CHECK(ReadLog(dir, "rank" + n + ".stderr.log") == "err " + n + "\n");
  }
}

TEST_CASE("--local_ranks_filter shows only the listed local ranks on the console") {
  TempDir dir;
  auto r = Run(dir, {"--nproc_per_node", "3", "--local-ranks-filter", "1"}, kBothStreams);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "[rank 1] out 1\n");
  CHECK(Contains(r.err, "[rank 1] err 1\n"));
  CHECK_FALSE(Contains(r.err, "err 0"));
  CHECK_FALSE(Contains(r.err, "err 2"));
  CHECK(ReadLog(dir, "rank2.stdout.log") == "out 2\n");
}

TEST_CASE("torchtitan's torchrun flags run a job on this machine: localhost:0, --role, notes for what changes nothing") {
  TempDir dir;
  auto r = Run(dir,
               {"--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--role", "rank",
                "--monitor-interval", "1", "--tee", "3"},
               {"--no_python", "/bin/sh", "-c", "echo $ROLE_NAME $RANK of $WORLD_SIZE"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 0] rank 0 of 2\n"));
  CHECK(Contains(r.out, "[rank 1] rank 1 of 2\n"));
  CHECK(r.err.find("dslaunch: note: --monitor_interval: ignored: the agents hear of a worker's exit at once, without "
                   "polling\n") == 0);
}

TEST_CASE("--run_path runs a script without .py under the Python interpreter") {
  TempDir dir;
  const std::string script = dir.path() + "/train";
  std::ofstream(script) << "import os\nprint('python', __name__, os.environ['LOCAL_RANK'])\n";
  auto r = Run(dir, {"--run-path", "--no_local_rank"}, {script});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "[rank 0] python __main__ 0\n");
}

TEST_CASE("A refused DeepSpeed flag stops before anything starts, with exit code 2") {
  TempDir dir;
  auto r = Run(dir, {"--autotuning", "tune"}, {"--no_python", "/bin/echo", "hi"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("dslaunch: --autotuning: not supported: ") == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/logs"));
}

}  // namespace
}  // namespace dslaunch::testing
