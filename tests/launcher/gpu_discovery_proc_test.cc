// Proc tests: a local job's default slots come from the machine's GPUs (docs/cli.md, "Default
// slots from the machine's GPUs"), seen through --dry-run=json of the real launcher. The GPUs are
// faked by real programs: a script named nvidia-smi first on PATH, and a shared library
// (tests/fakes/fake_nvml.cc) loaded in place of libnvidia-ml.so.1.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{60};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// A directory holding an executable `nvidia-smi` with this shell body.
class FakeNvidiaSmi {
 public:
  explicit FakeNvidiaSmi(const std::string& body) {
    const std::string path = dir_.path() + "/nvidia-smi";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
  }
  const std::string& dir() const { return dir_.path(); }
  // PATH with this directory first: the launcher finds this nvidia-smi before any other.
  std::string Path() const { return "PATH=" + dir_.path() + ":/usr/bin:/bin"; }

 private:
  TempDir dir_;
};

// `dslaunch --dry-run=json ARGS...` with CUDA_VISIBLE_DEVICES unset, NVML skipped unless `env`
// names a library, and `env` on top.
ProcessResult DryRun(std::vector<std::string> env, std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "CUDA_VISIBLE_DEVICES", "DSLAUNCH_NVML_LIBRARY="};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {kLauncher, "--dry-run=json"});
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--no_python", "/bin/true"});
  return RunProcess(argv, kRunTimeout);
}

constexpr char kThreeGpus[] =
    "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)'\n"
    "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)'\n"
    "echo '  MIG 3g.40gb     Device  0: (UUID: MIG-c)'\n"
    "echo 'GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-d)'\n";

TEST_CASE("Without a hostfile or --nproc_per_node a local job runs one worker per GPU that nvidia-smi lists") {
  FakeNvidiaSmi smi(kThreeGpus);
  auto r = DryRun({smi.Path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto plan = nlohmann::json::parse(r.out);
  CHECK(plan["world_size"] == 3);
  CHECK(plan["nodes"][0]["slots"] == nlohmann::json::array({0, 1, 2}));
  CHECK(plan["nodes"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2");

  // --include picks among them.
  auto some = DryRun({smi.Path()}, {"--include", "localhost:2"});
  REQUIRE(some.exit_code == 0);
  CHECK(nlohmann::json::parse(some.out)["nodes"][0]["slots"] == nlohmann::json::array({2}));
}

TEST_CASE("GPUs are not counted when the command line or CUDA_VISIBLE_DEVICES gives the workers") {
  FakeNvidiaSmi smi("touch \"$(dirname \"$0\")/ran\"\necho 'GPU 0: x'\necho 'GPU 1: y'\n");
  auto given = DryRun({smi.Path()}, {"--nproc_per_node", "1"});
  REQUIRE(given.exit_code == 0);
  CHECK(nlohmann::json::parse(given.out)["world_size"] == 1);
  auto visible = DryRun({smi.Path(), "CUDA_VISIBLE_DEVICES=0,1,2,3"});
  REQUIRE(visible.exit_code == 0);
  CHECK(nlohmann::json::parse(visible.out)["world_size"] == 4);
  TempDir hosts;
  std::ofstream(hosts.path() + "/hosts") << "localhost slots=1\n";
  auto hostfile = DryRun({smi.Path()}, {"-H", hosts.path() + "/hosts"});
  REQUIRE(hostfile.exit_code == 0);
  CHECK(nlohmann::json::parse(hostfile.out)["world_size"] == 1);
  CHECK_FALSE(std::filesystem::exists(smi.dir() + "/ran"));
  // The marker works: a run that counts leaves it.
  REQUIRE(DryRun({smi.Path()}).exit_code == 0);
  CHECK(std::filesystem::exists(smi.dir() + "/ran"));
}

TEST_CASE("A machine without NVML or nvidia-smi runs one worker, and nvidia-smi's own error stops the launcher") {
  TempDir empty;
  auto none = DryRun({"PATH=" + empty.path()});
  INFO(none.err);
  REQUIRE(none.exit_code == 0);
  CHECK(nlohmann::json::parse(none.out)["world_size"] == 1);
  FakeNvidiaSmi no_devices("echo 'No devices were found'\nexit 6\n");
  auto zero = DryRun({no_devices.Path()});
  REQUIRE(zero.exit_code == 0);
  CHECK(nlohmann::json::parse(zero.out)["world_size"] == 1);

  FakeNvidiaSmi broken(
      "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n");
  auto failed = DryRun({broken.Path()});
  CHECK(failed.exit_code == kExitInfrastructure);  // the machine's fault (docs/exit-codes.md)
  CHECK(failed.out.empty());
  CHECK(Contains(failed.err, "dslaunch: cannot count this machine's GPUs for the default number of workers: " +
                                 broken.dir() +
                                 "/nvidia-smi: nvidia-smi -L exited with code 9: 'NVIDIA-SMI has failed because it "
                                 "couldn't communicate with the NVIDIA driver.'; give --nproc_per_node N to skip the "
                                 "count"));
}

TEST_CASE("NVML loaded at run time wins over nvidia-smi, and its errors are reported") {
  FakeNvidiaSmi smi(kThreeGpus);
  const std::string nvml = std::string("DSLAUNCH_NVML_LIBRARY=") + DSLAUNCH_FAKE_NVML;
  auto five = DryRun({smi.Path(), nvml, "FAKE_NVML_GPUS=5"});
  INFO(five.err);
  REQUIRE(five.exit_code == 0);
  CHECK(nlohmann::json::parse(five.out)["world_size"] == 5);

  auto zero = DryRun({smi.Path(), nvml, "FAKE_NVML_GPUS=0"});
  REQUIRE(zero.exit_code == 0);
  CHECK(nlohmann::json::parse(zero.out)["world_size"] == 1);

  auto failed = DryRun({smi.Path(), nvml, "FAKE_NVML_INIT_ERROR=9"});
  CHECK(failed.exit_code == kExitInfrastructure);  // the machine's fault (docs/exit-codes.md)
  CHECK(Contains(failed.err, std::string("NVML (") + DSLAUNCH_FAKE_NVML +
                                 "): nvmlInit_v2 failed with code 9 (Driver Not Loaded); give --nproc_per_node N"));

  // A library that is not there is no NVML: nvidia-smi answers.
  auto missing = DryRun({smi.Path(), "DSLAUNCH_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"});
  REQUIRE(missing.exit_code == 0);
  CHECK(nlohmann::json::parse(missing.out)["world_size"] == 3);
}

}  // namespace
}  // namespace dslaunch::testing
