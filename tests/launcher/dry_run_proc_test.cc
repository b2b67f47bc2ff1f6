// Proc tests: what the real launcher reads from its own environment and command line at the edge
// (main.cc), seen through --dry-run=json: the launcher's CUDA_VISIBLE_DEVICES, --python and
// PYTHON_EXEC, the per-host slot limit, and redaction of URL credentials.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{60};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// `env -u CUDA_VISIBLE_DEVICES -u PYTHON_EXEC [ENV...] dslaunch --dry-run=json ARGS...`: the
// variables under test start unset whatever the test runner's environment holds.
ProcessResult DryRun(std::vector<std::string> args, std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "CUDA_VISIBLE_DEVICES", "-u", "PYTHON_EXEC"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {kLauncher, "--dry-run=json"});
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, kRunTimeout);
}

TEST_CASE("The launcher's CUDA_VISIBLE_DEVICES restricts a local job to those devices") {
  auto r = DryRun({"--no_python", "/bin/true"}, {"CUDA_VISIBLE_DEVICES=0,2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto plan = nlohmann::json::parse(r.out);
  CHECK(plan["world_size"] == 2);
  CHECK(plan["nodes"][0]["slots"] == nlohmann::json::array({0, 2}));
  CHECK(plan["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "0,2");

  auto first = DryRun({"--nproc_per_node", "1", "--no_python", "/bin/true"}, {"CUDA_VISIBLE_DEVICES=3,1"});
  REQUIRE(first.exit_code == 0);
  CHECK(nlohmann::json::parse(first.out)["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "3");

  auto none = DryRun({"--nproc_per_node", "2", "--no_python", "/bin/true"}, {"CUDA_VISIBLE_DEVICES="});
  REQUIRE(none.exit_code == 0);
  CHECK(nlohmann::json::parse(none.out)["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "");

  auto unset = DryRun({"--nproc_per_node", "2", "--no_python", "/bin/true"});
  REQUIRE(unset.exit_code == 0);
  CHECK(nlohmann::json::parse(unset.out)["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1");
}

TEST_CASE("The launcher's CUDA_VISIBLE_DEVICES with a hostfile or too many workers is refused") {
  TempDir dir;
  std::ofstream(dir.path() + "/hosts") << "localhost slots=4\n";
  auto hostfile = DryRun({"-H", dir.path() + "/hosts", "--no_python", "/bin/true"}, {"CUDA_VISIBLE_DEVICES=1"});
  CHECK(hostfile.exit_code == 2);
  CHECK(Contains(hostfile.err, "CUDA_VISIBLE_DEVICES='1' is set in the launcher's environment, but with --hostfile"));
  CHECK(hostfile.out.empty());
  auto many = DryRun({"--nproc_per_node", "3", "--no_python", "/bin/true"}, {"CUDA_VISIBLE_DEVICES=0,1"});
  CHECK(many.exit_code == 2);
  CHECK(Contains(many.err, "makes only 2 device(s) visible"));
}

TEST_CASE("--python, else PYTHON_EXEC, else python3 runs a Python program") {
  auto flag = DryRun({"--python", "/venv/bin/python", "train.py"}, {"PYTHON_EXEC=/other/python"});
  REQUIRE(flag.exit_code == 0);
  CHECK(nlohmann::json::parse(flag.out)["nodes"][0]["workers"][0]["argv"][0] == "/venv/bin/python");
  auto env = DryRun({"-m", "pkg.train"}, {"PYTHON_EXEC=/other/python"});
  REQUIRE(env.exit_code == 0);
  CHECK(nlohmann::json::parse(env.out)["nodes"][0]["workers"][0]["argv"] ==
        nlohmann::json::array({"/other/python", "-u", "-m", "pkg.train", "--local_rank=0"}));
  auto plain = DryRun({"train.py"});
  REQUIRE(plain.exit_code == 0);
  CHECK(nlohmann::json::parse(plain.out)["nodes"][0]["workers"][0]["argv"][0] == "python3");
  auto not_python = DryRun({"--python", "/venv/bin/python", "./a.out"});
  CHECK(not_python.exit_code == 2);
  CHECK(Contains(not_python.err, "--python /venv/bin/python: PROGRAM './a.out' is not a .py file"));
}

TEST_CASE("A hostfile or --nproc_per_node beyond the per-host slot limit is refused with its location") {
  TempDir dir;
  std::ofstream(dir.path() + "/hosts") << "a slots=8\nb slots=16384\n";
  auto hostfile = DryRun({"-H", dir.path() + "/hosts", "--no_python", "/bin/true"});
  CHECK(hostfile.exit_code == 2);
  CHECK(hostfile.err == "dslaunch: " + dir.path() +
                            "/hosts:2: slots=16384 exceeds the limit of 1024 slots per host (docs/hostfile.md)\n");
  auto nproc = DryRun({"--nproc_per_node", "65536", "--no_python", "/bin/true"});
  CHECK(nproc.exit_code == 2);
  CHECK(nproc.err == "dslaunch: --num_gpus/--nproc_per_node 65536 exceeds the limit of 1024 slots per host\n");
}

TEST_CASE("A dry run hides the password of a URL in an exported variable") {
  auto r = DryRun({"--no_python", "/bin/true"}, {"MLFLOW_TRACKING_URI=https://bob:pass@mlflow.example.com"});
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(Contains(r.out, "pass@"));
  CHECK(nlohmann::json::parse(r.out)["nodes"][0]["env"]["MLFLOW_TRACKING_URI"] ==
        "https://bob:***@mlflow.example.com");
}

}  // namespace
}  // namespace dslaunch::testing
