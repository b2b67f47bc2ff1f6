// The bundled runtime at a restart, end to end: the real launcher, agents, dslaunch-worker and
// Gloo. A real restart (--max_restarts, a rank killed by the checkpoint fault hook): automatic
// resume without `load` and metrics.jsonl across generations; an elasticity section refusing a
// world size; the progress file of hang detection. A resume at another world size needs another
// node count: tests/runtime/elastic_train_cluster_test.cc.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "runtime/data/token_shard.h"
#include "tests/support/proc_checks.h"
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

// Periodic checkpoints every 2 steps into DIR/ckpt, and no `load`; no in-memory snapshots, so that
// a restart resumes from the disk (the snapshots' own tests: trainer_snapshot_test.cc,
// worker_proc_test.cc).
const std::string kCheckpoints = R"("checkpoint": {"dir": "ckpt", "interval": 2, "snapshot_interval": 0},)";

// `dslaunch` on one node with `ranks` workers running dslaunch-worker on `config`.
ProcessResult Launch(const TempDir& dir, int ranks, const std::string& config) {
  return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", std::to_string(ranks), config},
                    std::chrono::seconds(180));
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

  // Rank 1 dies with SIGKILL as the save of step 6 begins (generation 0 only): the newest complete
  // checkpoint is step 4, and generation 1 must redo steps 5 and 6 from it.
  TempDir dir;
  const int64_t start_ms = NowMs();
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", "--job_id", "job",
                       "--max_restarts", "1", "--grace_period", "2", "--export",
                       "DSLAUNCH_CHECKPOINT_FAULT=before_shard@1@6", WriteConfig(dir, "six.json", 6, batch, kCheckpoints)},
                      std::chrono::seconds(180));
  const int64_t end_ms = NowMs();
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("dslaunch: generation 0: rank 1 on host localhost exited with signal 9 (SIGKILL); restarting") !=
        std::string::npos);
  CHECK(r.out.find("restart: resumed from " + dir.path() + "/ckpt/global_step4 at step 4") != std::string::npos);
  const auto losses = Losses(r.out);
  REQUIRE(losses.size() == 8);  // generation 0's six steps, then generation 1's steps 5 and 6
  CHECK(losses[6] == expected[4]);  // the same printed digits: same world size, bitwise
  CHECK(losses[7] == expected[5]);

  // Generation 0 started the file, generation 1 appended to it.
  const std::string metrics = ReadWhole(dir.path() + "/logs/job/metrics.jsonl");
  const auto records = GenerationRecords(metrics);
  REQUIRE(records.size() == 2);
  CHECK(records[0].rfind(R"({"event":"generation","generation":0,"world_size":2,"reason":"start","resumed_step":0,)"
                         R"("started_ms":)", 0) == 0);
  std::smatch m;
  REQUIRE(std::regex_match(records[1], m,
                           std::regex(R"j(\{"event":"generation","generation":1,"world_size":2,"reason":"rank 1 on )j"
                                      R"j(host localhost exited with signal 9 \(SIGKILL\)","resumed_step":4,)j"
                                      R"j("seconds_lost":([0-9.]+),"started_ms":\d+,"rendezvous_ms":\d+,"first_step_ms":\d+\})j")));
  // From the fault to the first completed step of generation 1: within the launcher's run.
  const double lost = std::stod(m[1]);
  CHECK(lost > 0);
  CHECK(lost <= static_cast<double>(end_ms - start_ms) / 1e3);
}

TEST_CASE("An elasticity section chooses the batch, and refuses a world size it excludes with the sizes it allows") {
  TempDir dir;
  const std::string elastic = R"("elasticity": {"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [2],
                                                "min_gpus": 1, "max_gpus": 4, "version": 0.1})";
  const std::string config = WriteConfig(dir, "elastic.json", 2, elastic);
  auto refused = Launch(dir, 3, config);
  CHECK(refused.exit_code == 2);  // a configuration error (docs/exit-codes.md)
  CHECK(refused.err.find("elastic.json: $.elasticity: world size 3 cannot keep the elastic train_batch_size 8: it "
                         "can run at world sizes 1, 2, 4") != std::string::npos);
  auto two = Launch(dir, 2, config);
  INFO(two.err);
  CHECK(two.exit_code == 0);
  CHECK(two.out.find("batch: elasticity chose train_batch_size 8, valid at world sizes 1, 2, 4; at world size 2: "
                     "micro-batch 2 x accumulation 2") != std::string::npos);
  CHECK(Losses(two.out).size() == 2);
}

// Each further key of the section given in train.json, observed in the batch the worker runs with
// (its `batch:` line) or in its refusal (exit code 2, the key's path).
TEST_CASE("The elasticity keys min_gpus, max_gpus, prefer_larger_batch, ignore_non_elastic_batch_info and version "
          "change the batch the worker runs, or refuse the run naming them") {
  TempDir dir;
  auto section = [](const std::string& keys) {
    return R"("elasticity": {"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [2])" + keys + "}";
  };
  auto refused_with = [&](const std::string& name, int ranks, const std::string& batch_keys, const std::string& text) {
    INFO(name);
    auto run = Launch(dir, ranks, WriteConfig(dir, name, 1, batch_keys));
    CHECK(run.exit_code == 2);
    CHECK_MESSAGE(run.err.find(text) != std::string::npos, run.err);
  };
  // Without min_gpus and max_gpus, 8 runs at world sizes 1, 2, 4.
  refused_with("min_gpus.json", 1, section(R"(, "min_gpus": 2)"),
               "min_gpus.json: $.elasticity: world size 1 cannot keep the elastic train_batch_size 8: it can run at "
               "world sizes 2, 4");
  refused_with("max_gpus.json", 2, section(R"(, "max_gpus": 1)"),
               "max_gpus.json: $.elasticity: world size 2 cannot keep the elastic train_batch_size 8: it can run at "
               "world sizes 1");
  refused_with("version.json", 2, section(R"(, "version": 0.2)"),
               "version.json: $.elasticity: version 0.2 is not implemented");
  refused_with("batch_given.json", 2, R"("train_batch_size": 8, )" + section(""),
               "batch_given.json: $.train_batch_size: elasticity chooses the batch");
  auto ignored = Launch(dir, 2, WriteConfig(dir, "ignored.json", 1,
                                            R"("train_batch_size": 6, )" +
                                                section(R"(, "ignore_non_elastic_batch_info": true)")));
  CHECK(ignored.exit_code == 0);
  CHECK(ignored.out.find("batch: elasticity chose train_batch_size 8") != std::string::npos);
  CHECK(ignored.err.find("$.train_batch_size: ignored: elasticity chooses the batch") != std::string::npos);
  // Micro-batches 3 and 5 up to 20 at most 4 ranks: 20 ({1, 2, 4}) and 18 ({1, 2, 3}) tie.
  const std::string tie =
      R"("elasticity": {"enabled": true, "max_train_batch_size": 20, "micro_batch_sizes": [3, 5], "max_gpus": 4)";
  auto larger = Launch(dir, 2, WriteConfig(dir, "larger.json", 1, tie + "}"));
  CHECK(larger.out.find("batch: elasticity chose train_batch_size 20, valid at world sizes 1, 2, 4; at world size 2: "
                        "micro-batch 5 x accumulation 2") != std::string::npos);
  auto smaller = Launch(dir, 2, WriteConfig(dir, "smaller.json", 1, tie + R"(, "prefer_larger_batch": false})"));
  CHECK(smaller.out.find("batch: elasticity chose train_batch_size 18, valid at world sizes 1, 2, 3; at world size 2: "
                         "micro-batch 3 x accumulation 3") != std::string::npos);
}

TEST_CASE("The progress file holds the last step and the watchdog timeout in effect after a run") {
  TempDir dir;
  const std::string config = WriteConfig(dir, "progress.json", 5, R"("train_batch_size": 8)",
                                         R"("checkpoint": {"dir": "ckpt", "interval": 2},)");
  // train.watchdog_timeout in the train section: rewrite the file's train section.
  std::string text = ReadWhole(config);
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
  // The step and the timeout, then the figures (measured times, so only their presence).
  for (const std::string rank : {"0", "1"}) {
    const std::string report = ReadWhole(dir.path() + "/progress." + rank);
    CAPTURE(report);
    CHECK(report.rfind("5 timeout=45 step_ms=", 0) == 0);
    CHECK(report.find(" loss=") != std::string::npos);
    CHECK(report.find(" tokens_per_s=") != std::string::npos);
    CHECK(report.find(" ckpt_bytes=") != std::string::npos);
    CHECK(report.find(" ckpt_step=5\n") != std::string::npos);
  }
  // The launcher's --watchdog_timeout (DSLAUNCH_WATCHDOG_TIMEOUT) wins over train.json. The same
  // run from step 0 again: its checkpoints go first (a run without `load` does not start over
  // them, docs/checkpoint.md).
  std::filesystem::remove_all(dir.path() + "/ckpt");
  auto env_timeout = run("7.5");
  REQUIRE_MESSAGE(env_timeout.exit_code == 0, env_timeout.err);
  CHECK(ReadWhole(dir.path() + "/progress.0").rfind("5 timeout=7.5 step_ms=", 0) == 0);
  CHECK(ReadWhole(dir.path() + "/progress.1").rfind("5 timeout=7.5 step_ms=", 0) == 0);
}

}  // namespace
}  // namespace dslaunch::testing
