// The memory estimate is an upper bound of the measured peak (docs/offload.md, "The estimate is an
// upper bound"): the real launcher and dslaunch-worker train a small gpt over a matrix of ZeRO
// stages, precisions, offloads and buffer sizes, every rank prints its peak resident memory
// (VmHWM) beside the estimate it was checked against, and a peak above its estimate fails.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";

enum class Offload { kNone, kCpuOptimizer, kNvmeOptimizer, kNvmeParameters };
const char* Name(Offload o) {
  switch (o) {
    case Offload::kNone: return "none";
    case Offload::kCpuOptimizer: return "cpu optimizer";
    case Offload::kNvmeOptimizer: return "nvme optimizer";
    case Offload::kNvmeParameters: return "nvme parameters";
  }
  return "";
}

struct Case {
  int stage;
  std::string precision;  // fp32, fp16, bf16
  Offload offload;
  bool small_buffers;  // set by hand; otherwise left out (sized: DeepSpeed's defaults where they fit)
  int ranks;
};

// A gpt of 1.84M parameters in 4 blocks: its states, activations and buffers are of the order of the
// process's own memory, so that a term missing from either shows.
std::string Config(const Case& c, const std::string& swap) {
  std::string zero = "\"stage\": " + std::to_string(c.stage);
  if (c.small_buffers) {
    zero += R"(, "sub_group_size": 20000, "reduce_bucket_size": 50000, "stage3_prefetch_bucket_size": 50000)";
  }
  const std::string nvme = R"("device": "nvme", "nvme_path": ")" + swap + "\"";
  const std::string counts = c.small_buffers ? R"(, "buffer_count": 2)" : "";
  if (c.offload == Offload::kCpuOptimizer) zero += R"(, "offload_optimizer": {"device": "cpu"})";
  if (c.offload == Offload::kNvmeOptimizer) zero += ", \"offload_optimizer\": {" + nvme + counts + "}";
  if (c.offload == Offload::kNvmeParameters) {
    zero += ", \"offload_param\": {" + nvme + counts + (c.small_buffers ? R"(, "max_in_cpu": 0)" : "") + "}";
  }
  std::string precision;
  if (c.precision == "fp16") precision = R"("fp16": {"enabled": true, "initial_scale_power": 8},)";
  if (c.precision == "bf16") precision = R"("bf16": {"enabled": true},)";
  return R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, "steps_per_print": 1, "seed": 5, )" +
         precision + R"( "zero_optimization": {)" + zero + R"(},
    "model": {"type": "gpt", "n_layer": 4, "n_head": 4, "n_embd": 192, "block_size": 64, "vocab_size": 256},
    "data": {"train": "train.bin"}, "train": {"steps": 2, "eval_interval": 0}})";
}

std::vector<Case> Matrix() {
  std::vector<Case> cases;
  for (int stage : {0, 1, 2, 3}) {
    for (const char* precision : {"fp32", "fp16", "bf16"}) {
      for (Offload offload : {Offload::kNone, Offload::kCpuOptimizer, Offload::kNvmeOptimizer, Offload::kNvmeParameters}) {
        if (offload == Offload::kNvmeParameters && stage != 3) continue;  // parameters are partitioned at stage 3 only
        for (bool small : {false, true}) {
          if (offload == Offload::kCpuOptimizer && small) continue;  // "cpu" moves nothing: no buffers of its own
          cases.push_back({stage, precision, offload, small, 1});
        }
      }
    }
  }
  // Two ranks: rank 0 holds the largest shard, and the estimate is its.
  cases.push_back({1, "bf16", Offload::kNone, false, 2});
  cases.push_back({3, "fp16", Offload::kNvmeParameters, true, 2});
  cases.push_back({3, "fp32", Offload::kNvmeOptimizer, false, 2});
  return cases;
}

TEST_CASE("Every rank's peak resident memory is at most its estimate, over stages, precisions, offloads and buffers") {
  TempDir dir;
  TempDir swap("/var/tmp");  // a disk: O_DIRECT and io_uring
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 256));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::regex line(R"(\[rank (\d+)\] memory: peak .* \(VmHWM (\d+) bytes\), estimated .* \((\d+) bytes\))");
  std::ostringstream table;
  int index = 0;
  for (const Case& c : Matrix()) {
    const std::string name = "case" + std::to_string(index++) + ".json";
    std::ofstream(dir.path() + "/" + name) << Config(c, swap.path());
    const std::string what = "stage " + std::to_string(c.stage) + ", " + c.precision + ", offload " + Name(c.offload) +
                             ", " + (c.small_buffers ? "small buffers" : "buffer keys left out") + ", " +
                             std::to_string(c.ranks) + (c.ranks == 1 ? " rank" : " ranks");
    CAPTURE(what);
    // One compute thread each: the figures do not depend on how many cores the machine has.
    auto run = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", std::to_string(c.ranks),
                           dir.path() + "/" + name},
                          std::chrono::seconds(120), {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    int reported = 0;
    for (auto it = std::sregex_iterator(run.out.begin(), run.out.end(), line); it != std::sregex_iterator(); ++it) {
      const double peak = std::stod((*it)[2]), estimate = std::stod((*it)[3]);
      table << what << ", rank " << (*it)[1] << ": peak " << peak / (1 << 20) << " MiB, estimate "
            << estimate / (1 << 20) << " MiB (" << peak / estimate << ")\n";
      CAPTURE(peak);
      CAPTURE(estimate);
      CHECK(peak <= estimate);
      ++reported;
    }
    CHECK(reported == c.ranks);
  }
  MESSAGE(table.str());
}

}  // namespace
}  // namespace dslaunch::testing
