// The bundled runtime at a restart, end to end: the real launcher, agents, dslaunch-worker and
// Gloo. A later generation is simulated by starting the workers through `env` with the variables
// the launcher sets at a restart (DSLAUNCH_RESTART_COUNT, DSLAUNCH_RESTART_REASON,
// DSLAUNCH_FAULT_TIME_MS): automatic resume without `load`, the global batch kept at another world
// size, an elasticity section refusing a world size, metrics.jsonl across generations, and the
// progress file of hang detection.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "runtime/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
const std::string kWorker = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-worker";

std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  std::regex line(R"(\[rank 0\] step \d+ \| loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  return losses;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The tiny gpt of worker_proc_test.cc; `batch_keys` and `extra` are spliced into the top level.
std::string WriteConfig(const TempDir& dir, const std::string& name, int steps, const std::string& batch_keys,
                        const std::string& extra = "") {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << "{" << batch_keys << R"(,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "zero_optimization": {"stage": 2}, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},)"
                      << extra << R"("train": {"steps": )" << steps << "}}";
  return path;
}

// Periodic checkpoints every 2 steps into DIR/ckpt, and no `load`.
const std::string kCheckpoints = R"("checkpoint": {"dir": "ckpt", "interval": 2},)";

// `dslaunch` on one node with `ranks` workers running dslaunch-worker on `config`, through `env`
// with `vars` (NAME=VALUE) when given.
ProcessResult Launch(const TempDir& dir, int ranks, const std::string& config, const std::vector<std::string>& vars = {},
                     const std::string& job_id = "") {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node",
                                   std::to_string(ranks)};
  if (!job_id.empty()) argv.insert(argv.end(), {"--job_id", job_id});
  if (!vars.empty()) {
    argv.insert(argv.end(), {"--no_python", "/usr/bin/env"});
    argv.insert(argv.end(), vars.begin(), vars.end());
    argv.insert(argv.end(), {kWorker, "train"});
  }
  argv.push_back(config);
  return RunProcess(argv, std::chrono::seconds(180));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The lines of metrics.jsonl holding `"event":"generation"`.
std::vector<std::string> GenerationRecords(const std::string& metrics) {
  std::vector<std::string> records;
  size_t start = 0;
  for (size_t end; (end = metrics.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = metrics.substr(start, end - start);
    if (line.find("\"event\":\"generation\"") != std::string::npos) records.push_back(line);
  }
  return records;
}

TEST_CASE("A restarted generation resumes from the newest periodic checkpoint without `load`, and metrics.jsonl "
          "records both generations") {
  const std::string batch = R"("train_batch_size": 8, "train_micro_batch_size_per_gpu": 2)";
  TempDir reference_dir;
  auto reference = Launch(reference_dir, 2, WriteConfig(reference_dir, "ref.json", 6, batch, kCheckpoints));
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  const auto expected = Losses(reference.out);
  REQUIRE(expected.size() == 6);

  TempDir dir;
  auto first = Launch(dir, 2, WriteConfig(dir, "four.json", 4, batch, kCheckpoints), {}, "job");
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  REQUIRE(Slurp(dir.path() + "/ckpt/latest") == "global_step4\n");

  // The launcher keeps the job's directory across generations; this one-generation launcher
  // refuses a used job id, so the next "generation" gets its own job id with generation 0's
  // metrics.jsonl moved into its directory.
  std::filesystem::create_directories(dir.path() + "/logs/job.1");
  std::filesystem::rename(dir.path() + "/logs/job/metrics.jsonl", dir.path() + "/logs/job.1/metrics.jsonl");
  const int64_t fault_ms = NowMs() - 1500;
  auto restarted = Launch(dir, 2, WriteConfig(dir, "six.json", 6, batch, kCheckpoints),
                          {"DSLAUNCH_RESTART_COUNT=1", "DSLAUNCH_RESTART_REASON=rank 1 exited with signal 9 (SIGKILL)",
                           "DSLAUNCH_FAULT_TIME_MS=" + std::to_string(fault_ms)},
                          "job.1");
  const int64_t end_ms = NowMs();
  INFO(restarted.out);
  INFO(restarted.err);
  REQUIRE(restarted.exit_code == 0);
  CHECK(restarted.out.find("restart: resumed from " + dir.path() + "/ckpt/global_step4 at step 4") !=
        std::string::npos);
  const auto losses = Losses(restarted.out);
  REQUIRE(losses.size() == 2);
  CHECK(losses[0] == expected[4]);  // the same printed digits: same world size, bitwise
  CHECK(losses[1] == expected[5]);

  // Generation 0 started the file, generation 1 appended to it.
  const std::string metrics = Slurp(dir.path() + "/logs/job.1/metrics.jsonl");
  const auto records = GenerationRecords(metrics);
  REQUIRE(records.size() == 2);
  CHECK(records[0] == R"({"event":"generation","generation":0,"world_size":2,"reason":"start","resumed_step":0})");
  std::smatch m;
  REQUIRE(std::regex_match(records[1], m,
                           std::regex(R"j(\{"event":"generation","generation":1,"world_size":2,"reason":"rank 1 )j"
                                      R"j(exited with signal 9 \(SIGKILL\)","resumed_step":4,"seconds_lost":([0-9.]+)\})j")));
  // From the fault to the first completed step: at least the 1.5 s before the launch, at most
  // until the launcher returned.
  const double lost = std::stod(m[1]);
  CHECK(lost >= 1.5);
  CHECK(lost <= static_cast<double>(end_ms - fault_ms) / 1e3);
  CHECK(metrics.find("\"event\":\"end\",\"steps\":4") < metrics.find("\"event\":\"generation\",\"generation\":1"));
}

TEST_CASE("A checkpoint of 4 ranks resumes on 2 with the same global batch: micro-batch and accumulation follow") {
  // Written for 4 ranks: 8 = micro 2 x accumulation 1 x 4.
  const std::string batch =
      R"("train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1)";
  TempDir reference_dir;
  auto reference = Launch(reference_dir, 4, WriteConfig(reference_dir, "ref.json", 6, batch, kCheckpoints));
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  const auto expected = Losses(reference.out);
  REQUIRE(expected.size() == 6);
  CHECK(reference.out.find("batch: train_batch_size 8 = micro-batch 2 x accumulation 1 x world size 4\n") !=
        std::string::npos);

  TempDir dir;
  auto first = Launch(dir, 4, WriteConfig(dir, "four.json", 4, batch, kCheckpoints));
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  auto restarted = Launch(dir, 2, WriteConfig(dir, "six.json", 6, batch, kCheckpoints), {"DSLAUNCH_RESTART_COUNT=1"});
  INFO(restarted.out);
  INFO(restarted.err);
  REQUIRE(restarted.exit_code == 0);
  CHECK(restarted.out.find("batch: train_batch_size 8 = micro-batch 2 x accumulation 2 x world size 2 (re-derived "
                           "at restart; as configured: train_batch_size 8 != micro 2 x accumulation 1 x world 2 = 4)") !=
        std::string::npos);
  CHECK(restarted.out.find("restart: resumed from " + dir.path() + "/ckpt/global_step4 at step 4 (saved by 4 ranks") !=
        std::string::npos);
  const auto losses = Losses(restarted.out);
  REQUIRE(losses.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    // Another world size sums the gradients in another order: the runtime's fp32 bound (1e-5
    // relative, docs/checkpoint.md), plus the 6 printed decimals.
    CHECK(std::abs(losses[i] - expected[4 + i]) <= 2e-6 + 1e-5 * expected[4 + i]);
  }
  // Generation 0 follows DeepSpeed's rule: the same config on 2 ranks is refused.
  auto fresh = Launch(dir, 2, dir.path() + "/six.json");
  CHECK(fresh.exit_code == 1);
  CHECK(fresh.err.find("$.train_batch_size: train_batch_size 8 != micro 2 x accumulation 1 x world 2 = 4; it fits "
                       "world size 4") != std::string::npos);
}

TEST_CASE("An elasticity section chooses the batch, and refuses a world size it excludes with the sizes it allows") {
  TempDir dir;
  const std::string elastic = R"("elasticity": {"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [2],
                                                "min_gpus": 1, "max_gpus": 4, "version": 0.1})";
  const std::string config = WriteConfig(dir, "elastic.json", 2, elastic);
  auto refused = Launch(dir, 3, config);
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("elastic.json: $.elasticity: world size 3 cannot keep the elastic train_batch_size 8: it "
                         "can run at world sizes 1, 2, 4") != std::string::npos);
  auto two = Launch(dir, 2, config);
  INFO(two.err);
  CHECK(two.exit_code == 0);
  CHECK(two.out.find("batch: elasticity chose train_batch_size 8, valid at world sizes 1, 2, 4; at world size 2: "
                     "micro-batch 2 x accumulation 2") != std::string::npos);
  CHECK(Losses(two.out).size() == 2);
}

TEST_CASE("The progress file holds the last step and the watchdog timeout in effect after a run") {
  TempDir dir;
  const std::string config = WriteConfig(dir, "progress.json", 5, R"("train_batch_size": 8)",
                                         R"("checkpoint": {"dir": "ckpt", "interval": 2},)");
  // train.watchdog_timeout in the train section: rewrite the file's train section.
  std::string text = Slurp(config);
  text.replace(text.find(R"("train": {"steps": 5})"), std::string(R"("train": {"steps": 5})").size(),
               R"("train": {"steps": 5, "watchdog_timeout": 45})");
  std::ofstream(config) << text;
  // Each rank its own file, as the agent gives them.
  auto run = [&](const std::string& env_timeout) {
    const std::string vars = "DSLAUNCH_PROGRESS_FILE=" + dir.path() + "/progress.$RANK" +
                             (env_timeout.empty() ? "" : " DSLAUNCH_WATCHDOG_TIMEOUT=" + env_timeout);
    return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", "--no_python", "/bin/sh",
                       "-c", "exec env " + vars + " " + kWorker + " train " + config},
                      std::chrono::seconds(120));
  };
  auto json_timeout = run("");
  REQUIRE_MESSAGE(json_timeout.exit_code == 0, json_timeout.err);
  CHECK(Slurp(dir.path() + "/progress.0") == "5 timeout=45\n");
  CHECK(Slurp(dir.path() + "/progress.1") == "5 timeout=45\n");
  // The launcher's --watchdog_timeout (DSLAUNCH_WATCHDOG_TIMEOUT) wins over train.json.
  auto env_timeout = run("7.5");
  REQUIRE_MESSAGE(env_timeout.exit_code == 0, env_timeout.err);
  CHECK(Slurp(dir.path() + "/progress.0") == "5 timeout=7.5\n");
  CHECK(Slurp(dir.path() + "/progress.1") == "5 timeout=7.5\n");
}

}  // namespace
}  // namespace dslaunch::testing
