// The node's OpenBLAS kernels through the real `dslaunch`, agents and dslaunch-worker processes
// (runtime/train/kernel_choice.h, docs/engine.md "Matrix kernels"): timed once per node in child
// processes, the choice written to the job directory, applied by every worker re-executing itself
// (a worker checks that it runs the kernels chosen), stated in one start-up line and in
// metrics.jsonl; DSLAUNCH_SGEMM_KERNEL and the user's OPENBLAS_CORETYPE steer it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/data/token_shard.h"
#include "runtime/ops/cpu/sgemm_choice.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr auto kJobTimeout = std::chrono::seconds(120);

// The files of `logs`'s one job directory whose names start with `prefix`.
std::vector<std::string> JobFiles(const std::string& logs, const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& job : std::filesystem::directory_iterator(logs)) {
    if (!job.is_directory()) continue;
    for (const auto& f : std::filesystem::directory_iterator(job.path())) {
      if (f.path().filename().string().rfind(prefix, 0) == 0) found.push_back(f.path().string());
    }
  }
  return found;
}

// The node's rate files (not their locks) in `logs`'s job directories.
std::vector<std::string> RateFiles(const std::string& logs) {
  std::vector<std::string> files;
  for (const auto& f : JobFiles(logs, "sgemm-kernels.")) {
    if (f.size() < 5 || f.compare(f.size() - 5, 5, ".lock") != 0) files.push_back(f);
  }
  return files;
}

struct Job {
  TempDir dir;
  std::string config;
  Job() {
    std::vector<uint16_t> tokens;
    for (int i = 0; i < 600; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
    REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
    config = dir.path() + "/tiny.json";
    std::ofstream(config) << R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
      "optimizer": {"type": "AdamW"},
      "model": {"type": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
      "data": {"train": "train.bin"}, "train": {"steps": 2}})";
  }
  ProcessResult Run(const std::vector<std::string>& env = {}, const std::vector<std::string>& options = {}) {
    std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back(config);
    return RunProcess(argv, kJobTimeout, env);
  }
};

// Whether this CPU can run OpenBLAS's Sandybridge kernels (AVX), which the tests force: they are
// not the widest on any CPU of the last decade, so a forced choice differs from the automatic one.
bool CpuRunsSandybridgeKernels() {
  const auto candidates = runtime::ops::CandidateCoreTypes(runtime::ops::ReadCpuFeatures());
  return std::find(candidates.begin(), candidates.end(), "Sandybridge") != candidates.end();
}

// The "sgemm: ..." lines of the output.
std::vector<std::string> KernelLines(const std::string& out) {
  std::vector<std::string> lines;
  std::regex line(R"(\[rank \d+\] (sgemm: [^\n]*))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    lines.push_back((*it)[1]);
  }
  return lines;
}

// The one "sgemm: ..." line of a job that must have succeeded.
std::string KernelLineOfSuccess(const ProcessResult& r) {
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto stated = KernelLines(r.out);
  REQUIRE(stated.size() == 1);
  return stated[0];
}

TEST_CASE("The node's kernels are timed once, chosen by the rule, applied in every worker and stated once") {
  Job job;
  auto r = job.Run({"DSLAUNCH_SGEMM_KERNEL=auto"});
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The rates the node's first worker timed, one line per kernel, OpenBLAS's own first.
  const auto rate_files = RateFiles(job.dir.path() + "/logs");
  REQUIRE(rate_files.size() == 1);
  std::vector<runtime::ops::KernelRate> rates;
  std::istringstream lines(ReadWhole(rate_files[0]));
  for (std::string line; std::getline(lines, line);) {
    auto rate = runtime::ops::ParseKernelRate(line);
    REQUIRE_MESSAGE(rate.ok(), line);
    rates.push_back(*rate);
  }
  const auto candidates = runtime::ops::CandidateCoreTypes(runtime::ops::ReadCpuFeatures());
  REQUIRE(rates.size() == 1 + candidates.size());
  CHECK(rates[0].core_type.empty());
  for (size_t i = 0; i < candidates.size(); ++i) CHECK(rates[i + 1].core_type == candidates[i]);
  for (const auto& rate : rates) {
    CHECK(rate.error.empty());
    CHECK(rate.exact);
    CHECK(rate.gflops > 0);
  }
  // The line states the rule's choice from those rates, once (one node: local rank 0).
  auto choice = runtime::ops::ChooseKernel(rates);
  REQUIRE(choice.ok());
  const std::vector<std::string> stated = KernelLines(r.out);
  REQUIRE(stated.size() == 1);
  CHECK(stated[0] == runtime::ops::KernelChoiceLine(*choice, "timed on this node"));
  CHECK(Count(r.out, "[rank 0] sgemm: ") == 1);
  // metrics.jsonl holds it too.
  const auto metrics = JobFiles(job.dir.path() + "/logs", "metrics.jsonl");
  REQUIRE(metrics.size() == 1);
  CHECK(Count(ReadWhole(metrics[0]), "\"sgemm_kernel\":\"" + choice->kernel + "\"") == 1);
  CHECK(Count(ReadWhole(metrics[0]), "\"sgemm_default_kernel\":\"" + choice->default_kernel + "\"") == 1);
}

TEST_CASE("DSLAUNCH_SGEMM_KERNEL forces a kernel: both workers re-execute and run it") {
  DSLAUNCH_SKIP_UNLESS(CpuRunsSandybridgeKernels(), "avx", "this CPU has no AVX for OpenBLAS's Sandybridge kernels");
  Job job;
  // Each worker fails if the kernels it runs after re-executing are not the ones chosen.
  auto r = job.Run({"DSLAUNCH_SGEMM_KERNEL=Sandybridge"});
  const std::string stated = KernelLineOfSuccess(r);
  CHECK(stated.rfind("sgemm: OpenBLAS Sandybridge kernels, ", 0) == 0);
  CHECK(stated.find("(DSLAUNCH_SGEMM_KERNEL=Sandybridge)") != std::string::npos);
  CHECK(Count(r.out, "[rank 1] step 2 |") + Count(r.out, "[rank 0] step 2 |") == 1);
}

TEST_CASE("A rate file for other kernels in the job directory is timed again, not trusted") {
  DSLAUNCH_SKIP_UNLESS(CpuRunsSandybridgeKernels(), "avx", "this CPU has no AVX for OpenBLAS's Sandybridge kernels");
  Job job;
  auto first = job.Run({"DSLAUNCH_SGEMM_KERNEL=default"}, {"--job_id", "first"});
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  CHECK(KernelLines(first.out).at(0).find("(OpenBLAS's own choice)") != std::string::npos);
  // That file holds OpenBLAS's own rate only, not what a forced kernel needs; placed in the next
  // job's directory (a job id cannot be used twice), it must not decide that job's kernels.
  const auto earlier = RateFiles(job.dir.path() + "/logs");
  REQUIRE(earlier.size() == 1);
  std::filesystem::create_directories(job.dir.path() + "/logs/again");
  std::filesystem::copy_file(earlier[0], job.dir.path() + "/logs/again/" +
                                             std::filesystem::path(earlier[0]).filename().string());
  auto second = job.Run({"DSLAUNCH_SGEMM_KERNEL=Sandybridge"}, {"--job_id", "again"});
  INFO(second.out);
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(KernelLines(second.out).at(0).rfind("sgemm: OpenBLAS Sandybridge kernels, ", 0) == 0);
  const std::string again = job.dir.path() + "/logs/again/" + std::filesystem::path(earlier[0]).filename().string();
  CHECK(Count(ReadWhole(again), "core_type=Sandybridge") == 1);
}

TEST_CASE("The user's OPENBLAS_CORETYPE is honoured and only timed") {
  DSLAUNCH_SKIP_UNLESS(CpuRunsSandybridgeKernels(), "avx", "this CPU has no AVX for OpenBLAS's Sandybridge kernels");
  Job job;
  auto r = job.Run({"OPENBLAS_CORETYPE=Sandybridge", "DSLAUNCH_SGEMM_KERNEL=auto"});
  const std::string stated = KernelLineOfSuccess(r);
  CHECK(stated.rfind("sgemm: OpenBLAS Sandybridge kernels (OpenBLAS's own choice), ", 0) == 0);
  CHECK(stated.find("also measured") == std::string::npos);
  CHECK(stated.find("(OPENBLAS_CORETYPE=Sandybridge set by the user)") != std::string::npos);
}

TEST_CASE("A DSLAUNCH_SGEMM_KERNEL that names no kernel ends the job with the configuration exit class") {
  Job job;
  auto r = job.Run({"DSLAUNCH_SGEMM_KERNEL=skylake"});
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(Count(r.err, "DSLAUNCH_SGEMM_KERNEL='skylake': expected auto, default or one of SkylakeX, Haswell, "
                     "Sandybridge") >= 1);
  CHECK(Count(r.out, "step 1 |") == 0);
}

}  // namespace
}  // namespace dslaunch::testing
