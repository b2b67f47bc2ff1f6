// `dslaunch train.json` end to end: the real launcher, agents, dslaunch-worker processes and Gloo.
// The same run on 1 and 2 ranks (same global batch) prints the same losses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <csignal>
#include <regex>

#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";

std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  std::regex line(R"(\[rank 0\] step \d+ \| loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  return losses;
}

TEST_CASE("dslaunch train.json trains the same on 1 and 2 ranks, ZeRO stages 0-3 and fp16, through real Gloo") {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  std::ofstream(dir.path() + "/tiny.json") << R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "gradient_clipping": 1.0, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "train": {"steps": 5}
  })";
  {
    // The same run at ZeRO stages 1-3 (small buckets: several collectives per step), and in fp16
    // at stage 3.
    std::ifstream in(dir.path() + "/tiny.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto variant = [&](const std::string& name, const std::string& keys) {
      std::string t = text;
      t.insert(t.find('{') + 1, keys);
      std::ofstream(dir.path() + "/" + name) << t;
    };
    const std::string buckets = R"("reduce_bucket_size": 1500, "allgather_bucket_size": 1000,
                                    "stage3_prefetch_bucket_size": 3000, "stage3_param_persistence_threshold": 40)";
    variant("tiny1.json", R"("zero_optimization": {"stage": 1, )" + buckets + "},");
    variant("tiny2.json", R"("zero_optimization": {"stage": 2, )" + buckets + "},");
    variant("tiny3.json", R"("zero_optimization": {"stage": 3, )" + buckets + "},");
    variant("tiny3h.json", R"("fp16": {"enabled": true}, "zero_optimization": {"stage": 3, )" + buckets + "},");
  }
  auto run = [&](int ranks, const std::string& config) {
    return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", std::to_string(ranks),
                       dir.path() + "/" + config},
                      std::chrono::seconds(120));
  };
  auto one = run(1, "tiny.json");
  auto a = Losses(one.out);
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(a.size() == 5);
  for (auto [ranks, config] : {std::pair{2, "tiny.json"}, {2, "tiny1.json"}, {2, "tiny2.json"}, {2, "tiny3.json"},
                               {2, "tiny3h.json"}}) {
    CAPTURE(config);
    // fp16 storage: docs/engine.md states 1e-4 relative for the loss.
    const double relative = std::string(config) == "tiny3h.json" ? 1e-4 : 1e-5;
    auto two = run(ranks, config);
    INFO(two.err);
    REQUIRE(two.exit_code == 0);
    auto b = Losses(two.out);
    REQUIRE(b.size() == 5);
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      // Printed with 6 decimals; fp32 sums in another order differ far less than that.
      CHECK(std::abs(a[i] - b[i]) <= 2e-6 + relative * a[i]);
    }
  }
  CHECK(a.back() < a.front());
}

// Reads a whole file.
std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("The demo config on 2 ranks lowers the validation loss on the fortunes text by more than 2 nats in 60 steps") {
  // The demo's model, optimizer and schedule (configs/gpt-demo.json) on the fortunes data, cut to
  // 60 steps without the sample. The model starts at the uniform predictor's loss, ln 256 = 5.55
  // (step 1's training loss); after 60 steps the full demo run measured a validation loss of
  // about 2.8 (2.81 at step 50). Margin stated in docs/engine.md: at least 2.0 below step 1's loss.
  const std::string fortunes = "/usr/share/games/fortunes";
  REQUIRE_MESSAGE(std::filesystem::is_directory(fortunes), (fortunes + " missing: run scripts/setup.sh"));
  TempDir dir;
  std::vector<std::string> prepare = {std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-worker", "prepare-text"};
  for (const auto& e : std::filesystem::directory_iterator(fortunes)) {
    if (e.is_regular_file() && e.path().extension().empty()) prepare.push_back(e.path().string());
  }
  std::sort(prepare.begin() + 2, prepare.end());
  prepare.insert(prepare.end(), {dir.path() + "/fortunes.train.bin", "--val", dir.path() + "/fortunes.val.bin"});
  auto prepared = RunProcess(prepare, std::chrono::seconds(60));
  REQUIRE_MESSAGE(prepared.exit_code == 0, prepared.err);

  std::string config = Slurp(std::string(DSLAUNCH_SOURCE_DIR) + "/configs/gpt-demo.json");
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = config.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    config.replace(at, from.size(), to);
  };
  replace(R"("../data/fortunes.train.bin")", "\"" + dir.path() + "/fortunes.train.bin\"");
  replace(R"("../data/fortunes.val.bin")", "\"" + dir.path() + "/fortunes.val.bin\"");
  replace(R"("steps": 200)", R"("steps": 60)");
  replace(R"("eval_interval": 50)", R"("eval_interval": 60)");
  replace(R"("sample_tokens": 200)", R"("sample_tokens": 0)");
  replace(R"("steps_per_print": 10)", R"("steps_per_print": 1)");
  std::ofstream(dir.path() + "/demo.json") << config;

  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--job_id", "demo", "--nproc_per_node", "2",
                       dir.path() + "/demo.json"},
                      std::chrono::seconds(300));
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto losses = Losses(r.out);
  REQUIRE(losses.size() == 60);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(step 60 \| validation loss ([0-9.]+))")));
  const double val = std::stod(m[1]);
  // Near the uniform predictor's ln 256 = 5.545, bounded on both sides (measured: 5.470).
  CHECK(std::abs(losses.front() - std::log(256.0)) < 0.1);
  CHECK(val < losses.front() - 2.0);
  // Rank 0 wrote the metrics: a start record, 60 steps, the validation, an end record.
  const std::string metrics = Slurp(dir.path() + "/logs/demo/metrics.jsonl");
  CHECK(metrics.rfind("{\"event\":\"start\",\"model\":\"gpt\"", 0) == 0);
  size_t steps = 0;
  for (size_t at = 0; (at = metrics.find("\"event\":\"step\"", at)) != std::string::npos; ++at) ++steps;
  CHECK(steps == 60);
  CHECK(metrics.find("\"event\":\"validation\",\"step\":60") != std::string::npos);
  CHECK(metrics.find("\"event\":\"end\"") != std::string::npos);
}

// The tiny run of the first test with checkpoints every `interval` steps into DIR/ckpt, resuming
// from the newest complete one when there is one.
// `snapshots`: in-memory snapshots as the launch's restarts make them (checkpoint.snapshot_interval
// left out); false: none (0), so that a restart resumes from the disk.
std::string WriteCheckpointConfig(const TempDir& dir, int steps, int interval = 2, bool snapshots = true) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::string path = dir.path() + "/ckpt" + std::to_string(steps) + ".json";
  std::ofstream(path) << R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "zero_optimization": {"stage": 2}, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "checkpoint": {"dir": "ckpt", "interval": )" << interval << (snapshots ? "" : R"(, "snapshot_interval": 0)")
                                                   << R"(, "load": "auto"},
    "train": {"steps": )" << steps << "}}";
  return path;
}

TEST_CASE("Killing a rank at any point of a save leaves the previous checkpoint, and the run resumes from it exactly") {
  TempDir base;
  const std::string reference_config = WriteCheckpointConfig(base, 6);
  auto reference = RunProcess({kLauncher, "--log_dir", base.path() + "/logs", "--nproc_per_node", "2", reference_config},
                              std::chrono::seconds(120));
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  const auto expected = Losses(reference.out);
  REQUIRE(expected.size() == 6);

  for (const char* fault : {"before_shard@1@4", "mid_shard@1@4", "before_meta@0@4", "before_latest@0@4"}) {
    CAPTURE(fault);
    TempDir dir;
    const std::string config = WriteCheckpointConfig(dir, 6);
    auto crashed = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", config},
                              std::chrono::seconds(120), {std::string("DSLAUNCH_CHECKPOINT_FAULT=") + fault});
    INFO(crashed.err);
    CHECK(crashed.exit_code == 137);  // the rank killed with SIGKILL
    CHECK(Slurp(dir.path() + "/ckpt/latest") == "global_step2\n");
    CHECK(std::filesystem::exists(dir.path() + "/ckpt/global_step2/meta.json"));
    if (std::string(fault).rfind("before_latest", 0) != 0) {
      CHECK_FALSE(std::filesystem::exists(dir.path() + "/ckpt/global_step4/meta.json"));
    }

    auto resumed = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", config},
                              std::chrono::seconds(120));
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed.out.find("resumed from " + dir.path() + "/ckpt/global_step2 at step 2") != std::string::npos);
    const auto losses = Losses(resumed.out);
    REQUIRE(losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(losses[i] == expected[2 + i]);  // same printed digits
    CHECK(Slurp(dir.path() + "/ckpt/latest") == "global_step6\n");
  }
}

TEST_CASE("A job whose newest checkpoint is corrupt resumes from the previous one, and after a killed worker "
          "ends in the state of an uninterrupted run") {
  // Before: every start failed on the corrupt shard (`rank00001.safetensors is corrupt: CRC-32C
  // ...`) though global_step4 was complete.
  TempDir base;
  // No in-memory snapshots: the restart below resumes from the disk, and the files' config_sha256
  // is the same in every run.
  auto reference = RunProcess({kLauncher, "--log_dir", base.path() + "/logs", "--nproc_per_node", "2",
                               WriteCheckpointConfig(base, 10, 2, /*snapshots=*/false)},
                              std::chrono::seconds(120));
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  const auto expected = Losses(reference.out);
  REQUIRE(expected.size() == 10);

  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  auto first = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2",
                           WriteCheckpointConfig(dir, 6, 2, /*snapshots=*/false)},
                          std::chrono::seconds(120));
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  const std::string shard = ckpt + "/global_step6/rank00001.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) - 3));
    f.put('\x55');
  }
  // The job again, to step 10, with one restart allowed; rank 1 is killed as the save of step 8
  // begins (generation 0 only).
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", "--max_restarts", "1",
                       "--grace_period", "2", "--export", "DSLAUNCH_CHECKPOINT_FAULT=before_shard@1@8",
                       WriteCheckpointConfig(dir, 10, 2, /*snapshots=*/false)},
                      std::chrono::seconds(180));
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("[rank 0] skipping checkpoint " + ckpt + "/global_step6: rank 1 could not read checkpoint " + ckpt +
                   "/global_step6: " + shard + " is corrupt: CRC-32C ") != std::string::npos);
  CHECK(r.out.find("[rank 0] resumed from " + ckpt + "/global_step4 at step 4") != std::string::npos);
  CHECK(r.err.find("rank 1 on host localhost exited with signal 9 (SIGKILL); restarting") != std::string::npos);
  CHECK(r.out.find("[rank 0] restart: resumed from " + ckpt + "/global_step6 at step 6") != std::string::npos);
  CHECK(r.out.find("[rank 0] removed " + ckpt + "/global_step8: a save that did not finish (no meta.json)") !=
        std::string::npos);
  const auto losses = Losses(r.out);
  REQUIRE(losses.size() == 8);  // generation 0: steps 5-8; generation 1: steps 7-10
  for (size_t i = 0; i < 4; ++i) CHECK(losses[i] == expected[4 + i]);
  for (size_t i = 0; i < 4; ++i) CHECK(losses[4 + i] == expected[6 + i]);
  // The final state is the uninterrupted run's, byte for byte.
  for (const char* file : {"rank00000.safetensors", "rank00001.safetensors", "meta.json"}) {
    CAPTURE(file);
    CHECK(Slurp(ckpt + "/global_step10/" + file) == Slurp(base.path() + "/ckpt/global_step10/" + file));
  }
}

// The losses of WriteCheckpointConfig(steps, interval) run on 2 ranks without a fault.
std::vector<double> UninterruptedLosses(int steps, int interval) {
  TempDir base;
  auto reference = RunProcess({kLauncher, "--log_dir", base.path() + "/logs", "--nproc_per_node", "2",
                               WriteCheckpointConfig(base, steps, interval)},
                              std::chrono::seconds(120));
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  std::vector<double> losses = Losses(reference.out);
  REQUIRE(losses.size() == static_cast<size_t>(steps));
  return losses;
}

TEST_CASE("checkpoint.snapshot_interval: a killed worker comes back from its agent's memory with no step lost; "
          "with 0, from the disk") {
  const std::vector<double> expected = UninterruptedLosses(10, 4);
  for (const int interval : {-1, 0}) {  // -1: the key left out
    CAPTURE(interval);
    TempDir dir;
    const std::string config = WriteCheckpointConfig(dir, 10, 4, /*snapshots=*/interval < 0);
    // Rank 1 killed once step 6 is done (its snapshot taken); checkpoints on disk at step 4.
    auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", "--max_restarts", "1",
                         "--grace_period", "2", "--export", "DSLAUNCH_CRASH_AFTER_STEP=1@6", config},
                        std::chrono::seconds(180));
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("rank 1 on host localhost exited with signal 9 (SIGKILL); restarting") != std::string::npos);
    const auto losses = Losses(r.out);
    if (interval < 0) {
      CHECK(r.out.find("[rank 0] snapshots: every step into the agent's memory (checkpoint.snapshot_interval left "
                       "out: the job can restart)") != std::string::npos);
      CHECK(r.out.find("[rank 0] restart: resumed from the in-memory snapshot at step 6 (saved by 2 ranks at ZeRO "
                       "stage 2, fp32; ") != std::string::npos);
      REQUIRE(losses.size() == 10);  // generation 0: steps 1-6; generation 1: steps 7-10, none run twice
      for (size_t i = 0; i < 10; ++i) CHECK(losses[i] == expected[i]);
    } else {
      CHECK(r.out.find("[rank 0] snapshots:") == std::string::npos);
      CHECK(r.out.find("[rank 0] restart: resumed from " + dir.path() + "/ckpt/global_step4 at step 4") !=
            std::string::npos);
      REQUIRE(losses.size() == 12);  // steps 5 and 6 run twice
      for (size_t i = 0; i < 6; ++i) CHECK(losses[6 + i] == expected[4 + i]);
    }
  }
}

TEST_CASE("A worker killed in the middle of its in-memory snapshot leaves the previous one, which every rank "
          "resumes from") {
  const std::vector<double> expected = UninterruptedLosses(10, 4);
  // Rank 1 dies with one tensor of its snapshot of step 6 copied: its slot of step 6 is not
  // complete, rank 0's is; both have step 5's.
  TempDir dir;
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", "--max_restarts", "1",
                       "--grace_period", "2", "--export", "DSLAUNCH_SNAPSHOT_FAULT=1@6",
                       WriteCheckpointConfig(dir, 10, 4)},
                      std::chrono::seconds(180));
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("killed in the middle of the snapshot of step 6") != std::string::npos);
  CHECK(r.out.find("[rank 0] restart: resumed from the in-memory snapshot at step 5 (saved by 2 ranks") !=
        std::string::npos);
  const auto losses = Losses(r.out);
  REQUIRE(losses.size() == 11);  // generation 0: steps 1-6; generation 1: steps 6-10
  for (size_t i = 0; i < 6; ++i) CHECK(losses[i] == expected[i]);
  for (size_t i = 0; i < 5; ++i) CHECK(losses[6 + i] == expected[5 + i]);
}

TEST_CASE("SIGTERM to the launcher saves a checkpoint at the next step boundary, from which the run resumes") {
  TempDir dir;
  const std::string config = WriteCheckpointConfig(dir, 1000000, /*interval=*/1000000);
  Subprocess job({kLauncher, "--log_dir", dir.path() + "/logs", "--job_id", "stop", "--nproc_per_node", "2", config});
  const std::string metrics = dir.path() + "/logs/stop/metrics.jsonl";
  REQUIRE(WaitFor([&] { return Slurp(metrics).find("\"step\":3,") != std::string::npos; }, std::chrono::seconds(60)));
  job.Signal(SIGTERM);
  auto stopped = job.Wait(std::chrono::seconds(60));
  INFO(stopped.out);
  INFO(stopped.err);
  CHECK(stopped.exit_code == 143);
  std::smatch m;
  const std::string out = stopped.out;
  REQUIRE(std::regex_search(out, m, std::regex(R"(step (\d+) \| checkpoint \(stop\))")));
  const std::string step = m[1];
  CHECK(out.find("step " + step + " | stopped on request") != std::string::npos);
  CHECK(Slurp(dir.path() + "/ckpt/latest") == "global_step" + step + "\n");
  // Resume to two steps past the stop.
  const std::string more = WriteCheckpointConfig(dir, std::stoi(step) + 2);
  auto resumed = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", more},
                            std::chrono::seconds(120));
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.out.find("at step " + step) != std::string::npos);
  CHECK(Losses(resumed.out).size() == 2);
}

}  // namespace
}  // namespace dslaunch::testing
