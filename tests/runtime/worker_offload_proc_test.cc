// Optimizer offload through the real launcher, dslaunch-worker processes and Gloo: the same
// losses as in memory, printed to the last digit, no swap file left behind, and a missing
// nvme_path that stops the job before training with the setting's name.
#include <doctest/doctest.h>


#include <filesystem>
#include <fstream>
#include <regex>

#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

namespace fs = std::filesystem;

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";

// The loss column of rank 0's step lines, as printed.
std::vector<std::string> LossTexts(const std::string& out) {
  std::vector<std::string> losses;
  std::regex line(R"(\[rank 0\] step \d+ \| loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    losses.push_back((*it)[1]);
  }
  return losses;
}

std::string Config(const std::string& offload) {
  return R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "gradient_clipping": 1.0, "steps_per_print": 1, "seed": 3, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 1500, "sub_group_size": 500)" +
         offload + R"(},
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "train": {"steps": 5}
  })";
}

TEST_CASE("dslaunch-worker with optimizer offload to NVMe prints the losses of the in-memory run") {
  TempDir dir;
  TempDir swap("/var/tmp");  // a disk: O_DIRECT and io_uring
  const std::string& swap_dir = swap.path();
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  std::ofstream(dir.path() + "/memory.json") << Config("");
  std::ofstream(dir.path() + "/nvme.json")
      << Config(R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + swap_dir + R"(", "buffer_count": 3})");
  std::ofstream(dir.path() + "/missing.json")
      << Config(R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + swap_dir + R"(/absent"})");
  auto run = [&](const std::string& config) {
    return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", dir.path() + "/" + config},
                      std::chrono::seconds(120));
  };
  auto memory = run("memory.json");
  INFO(memory.err);
  REQUIRE(memory.exit_code == 0);
  auto nvme = run("nvme.json");
  INFO(nvme.err);
  REQUIRE(nvme.exit_code == 0);
  const auto expected = LossTexts(memory.out);
  REQUIRE(expected.size() == 5);
  CHECK(LossTexts(nvme.out) == expected);  // to the last printed digit
  CHECK_FALSE(fs::exists(fs::path(swap_dir) / "dslaunch-swap"));  // each worker removed its file, the last one the directory

  auto missing = run("missing.json");
  CHECK(missing.exit_code != 0);
  CHECK(LossTexts(missing.out).empty());  // stopped before the first step
  CHECK_MESSAGE(missing.err.find("zero_optimization.offload_optimizer.nvme_path") != std::string::npos, missing.err);
  // The rank is named once: the worker adds it at its edge, the engine does not (no "rank 0: rank 0:").
  const std::string missing_line = "[rank 0] dslaunch-worker: failed precondition: rank 0: "
                                   "zero_optimization.offload_optimizer.nvme_path '" + swap_dir +
                                   "/absent': No such file or directory; create the directory or point the setting "
                                   "at an existing one\n";
  CHECK_MESSAGE(missing.err.find(missing_line) != std::string::npos, missing.err);
}

}  // namespace
}  // namespace dslaunch::testing
