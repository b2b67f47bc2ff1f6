// train.json through the real `dslaunch`, agents and dslaunch-worker processes (docs/train-json.md,
// "Errors"; docs/exit-codes.md): a config with several errors ends the job with the configuration
// exit class 2 and every error listed; a config written for a current DeepSpeed release, without an
// optimizer section, trains, and its start-up notes are printed once per job (rank 0).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>

#include "runtime/data/token_shard.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// A tiny model's few steps take about a second here; the bound is for a machine shared by builds.
constexpr auto kJobTimeout = std::chrono::seconds(120);

TEST_CASE("A train.json with several errors ends the job with exit code 2 and lists every error with its path") {
  TempDir dir;
  const std::string config = dir.path() + "/bad.json";
  std::ofstream(config) << R"({"train_batch_size": 8, "zero_optimization": {"stage": "two"},
    "optimizer": {"type": "AdamW", "params": {"lr": "fast"}},
    "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 8},
    "data": {"train": "train.bin"}, "train": {"steps": 1, "eval_intreval": 5},
    "my_own_note": "not a DeepSpeed key"})";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", config}, kJobTimeout);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  // Every rank reads the same file and fails the same way; the launcher's summary shows the
  // root-cause rank's stderr, whichever rank ended first.
  const std::string summary = "dslaunch:   | dslaunch-worker: invalid argument: 3 errors in the configuration:\n"
                              "dslaunch:   |   " + config + ": $.optimizer.params.lr: expected a number >= 0.0, got \"fast\"\n"
                              "dslaunch:   |   " + config + ": $.train.eval_intreval: unknown key (did you mean \"eval_interval\"?)\n"
                              "dslaunch:   |   " + config + ": $.zero_optimization.stage: expected an integer 0-3, got \"two\"\n";
  CHECK(Count(r.err, summary) == 1);
  CHECK(Count(r.err, ") exited with exit code 2\n") == 1);
  CHECK(Count(r.err, "dslaunch: stopped all workers; exit code 2\n") == 1);
  // An unknown key that is no typo is not among the errors.
  CHECK(Count(r.out + r.err, "my_own_note") == 0);
}

TEST_CASE("A config with current DeepSpeed keys and no optimizer section trains, with its notes printed once") {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 600; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::string config = dir.path() + "/current.json";
  std::ofstream(config) << R"({
    "train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "seed": 3,
    "torch_autocast": {"enabled": false, "dtype": "bfloat16"},
    "tensor_parallel": {"autotp_size": 1, "tp_overlap_comm": true},
    "zero_optimization": {"stage": 2, "zeropp_loco_param": {"err_beta": 0.8, "reset_T": 1024},
                          "stage3_use_all_reduce_for_fetch_params": false},
    "my_own_note": "not a DeepSpeed key",
    "model": {"type": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "train": {"steps": 3}
  })";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", config}, kJobTimeout);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string all = r.out + r.err;
  std::regex step(R"(\[rank 0\] step \d+ \| loss [0-9.]+)");
  CHECK(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), step), std::sregex_iterator()) == 3);
  // Once per job, from rank 0.
  CHECK(Count(all, "[rank 0] optimizer: no \"optimizer\" section; training with AdamW (lr 0.001, betas [0.9, 0.999], "
                   "eps 1e-08, weight_decay 0), DeepSpeed's defaults for {\"type\": \"AdamW\"}\n") == 1);
  CHECK(Count(all, "[rank 0] dslaunch-worker: warning: 4 DeepSpeed key(s) not implemented here, ignored: "
                   "$.tensor_parallel.tp_overlap_comm, $.zero_optimization.stage3_use_all_reduce_for_fetch_params, "
                   "$.zero_optimization.zeropp_loco_param, $.torch_autocast\n") == 1);
  CHECK(Count(all, "[rank 0] dslaunch-worker: warning: " + config +
                       ": $.my_own_note: unknown key, ignored (DeepSpeed ignores keys it does not know; check the "
                       "spelling if it was meant for dslaunch-worker)\n") == 1);
  CHECK(Count(all, "optimizer: no \"optimizer\" section") == 1);
  CHECK(Count(all, "not implemented here") == 1);
  CHECK(Count(all, "unknown key, ignored") == 1);
}

}  // namespace
}  // namespace dslaunch::testing
