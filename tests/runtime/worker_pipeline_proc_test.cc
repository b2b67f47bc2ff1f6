// Pipeline and tensor parallelism through the real `dslaunch`, agents and dslaunch-worker processes
// over Gloo (docs/parallelism.md): train.json's pipeline and tensor_parallel sections split the
// model into stages and over tensor ranks, each rank says where it sits, and the losses are the
// data-parallel run's of the same global batch (to the last printed digit with stages alone,
// within fp32 reassociation with tensor ranks).
#include <signal.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "launcher/status/job_state_file.h"
#include "launcher/status/status_client.h"
#include "runtime/data/token_shard.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr auto kJobTimeout = std::chrono::seconds(180);

// A gpt of 4 blocks on a text with structure; every step printed, a validation at the end.
struct Job {
  TempDir dir;
  Job() {
    std::vector<uint16_t> train, val;
    for (int i = 0; i < 4000; ++i) train.push_back(static_cast<uint16_t>((i % 7) * 4 + (i * 13 / 7) % 3));
    for (int i = 0; i < 600; ++i) val.push_back(static_cast<uint16_t>((i % 7) * 4));
    REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", train).ok());
    REQUIRE(runtime::WriteTokenShard(dir.path() + "/val.bin", val).ok());
  }
  // `pipeline` is the section's JSON ("" for none), or sections of their own (starting with a
  // quote); `batch` the global batch (micro-batch 2).
  std::string Config(const std::string& name, const std::string& pipeline, int batch,
                     const std::string& model = R"("n_layer": 4, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 32)",
                     int steps = 6) {
    const std::string path = dir.path() + "/" + name + ".json";
    std::ofstream(path) << R"({"train_batch_size": )" << batch << R"(, "train_micro_batch_size_per_gpu": 2,
      "steps_per_print": 1, "gradient_clipping": 1.0, "seed": 3,
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
      "zero_optimization": {"stage": 1},
      "model": {"type": "gpt", )" << model << R"(},
      "data": {"train": "train.bin", "val": "val.bin"},
      "train": {"steps": )" << steps << R"(, "eval_interval": 0, "eval_steps": 2, "sample_tokens": 0})"
                        << (pipeline.empty()       ? ""
                            : pipeline[0] == '"' ? ", " + pipeline
                                                 : R"(, "pipeline": )" + pipeline)
                        << "}";
    return path;
  }
  ProcessResult Run(const std::string& config, int ranks) {
    return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", std::to_string(ranks), config},
                      kJobTimeout, {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"});
  }
};

// Rank 0's "step N | loss X" and "validation loss X" values, as printed.
std::vector<std::string> Losses(const std::string& out) {
  std::vector<std::string> losses;
  std::regex loss(R"(\[rank 0\] step \d+ \| (?:validation )?loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), loss); it != std::sregex_iterator(); ++it) {
    losses.push_back((*it)[1]);
  }
  return losses;
}

// Each rank's "grid: ..." line.
std::map<int, std::string> GridLines(const std::string& out) {
  std::map<int, std::string> lines;
  std::regex line(R"(\[rank (\d+)\] (grid: [^\n]*))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    lines[std::stoi((*it)[1])] = (*it)[2];
  }
  return lines;
}

TEST_CASE("pipeline.stages and schedule: 2 stages x 2 copies and 4 stages print the data-parallel run's losses") {
  Job job;
  // The same global batch of 8: 2 copies x 2 micro-batches of 2, or 1 copy x 4.
  const ProcessResult dp2 = job.Run(job.Config("dp2", "", 8), 2);
  REQUIRE_MESSAGE(dp2.exit_code == 0, dp2.out << dp2.err);
  const ProcessResult pp2 = job.Run(job.Config("pp2", R"({"stages": 2})", 8), 4);
  REQUIRE_MESSAGE(pp2.exit_code == 0, pp2.out << pp2.err);
  const std::vector<std::string> want2 = Losses(dp2.out);
  REQUIRE(want2.size() == 7);  // 6 steps and the validation
  CHECK(Losses(pp2.out) == want2);
  const auto grid2 = GridLines(pp2.out);
  REQUIRE(grid2.size() == 4);
  CHECK(grid2.at(0) == "grid: stage 0/2 (blocks 0-1 of 4), data 0/2, tensor 0/1, 1f1b schedule");
  CHECK(grid2.at(3) == "grid: stage 1/2 (blocks 2-3 of 4), data 1/2, tensor 0/1, 1f1b schedule");
  CHECK_FALSE(Contains(dp2.out, "grid:"));

  const ProcessResult dp1 = job.Run(job.Config("dp1", "", 8), 1);
  REQUIRE_MESSAGE(dp1.exit_code == 0, dp1.out << dp1.err);
  const ProcessResult pp4 = job.Run(job.Config("pp4", R"({"stages": 4, "schedule": "GPipe"})", 8), 4);
  REQUIRE_MESSAGE(pp4.exit_code == 0, pp4.out << pp4.err);
  CHECK(Losses(pp4.out) == Losses(dp1.out));
  CHECK(GridLines(pp4.out).at(2) == "grid: stage 2/4 (blocks 2-2 of 4), data 0/1, tensor 0/1, gpipe schedule");
}

TEST_CASE("pipeline.partition_method: by parameters the stages with the embeddings and the head take fewer blocks") {
  Job job;
  // 6 blocks of 12,704 parameters; the embeddings (2064 x 32) and the head's copy of wte (2048 x
  // 32) weigh about 5.2 blocks each: by parameters 1, 4 and 1 blocks (largest stage 6.2 blocks'
  // worth) instead of 2, 2 and 2 (7.2).
  const std::string model = R"("n_layer": 6, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 2048)";
  const ProcessResult by_parameters = job.Run(job.Config("parameters", R"({"stages": 3})", 2, model), 3);
  REQUIRE_MESSAGE(by_parameters.exit_code == 0, by_parameters.out << by_parameters.err);
  const ProcessResult uniform =
      job.Run(job.Config("uniform", R"({"stages": 3, "partition_method": "uniform"})", 2, model), 3);
  REQUIRE_MESSAGE(uniform.exit_code == 0, uniform.out << uniform.err);
  CHECK(GridLines(by_parameters.out).at(1) == "grid: stage 1/3 (blocks 1-4 of 6), data 0/1, tensor 0/1, 1f1b schedule");
  CHECK(GridLines(uniform.out).at(1) == "grid: stage 1/3 (blocks 2-3 of 6), data 0/1, tensor 0/1, 1f1b schedule");
  // The same model either way: the same losses.
  CHECK(Losses(by_parameters.out) == Losses(uniform.out));
}

TEST_CASE("A pipeline that does not fit the job or the model is refused before training, naming the key") {
  Job job;
  const ProcessResult odd = job.Run(job.Config("odd", R"({"stages": 2})", 6), 3);
  CHECK(odd.exit_code == 2);
  CHECK_MESSAGE(Contains(odd.err, "$.pipeline.stages: 2 does not divide the 3 ranks of the job"), odd.err);
  const ProcessResult deep = job.Run(job.Config("deep", R"({"stages": 5})", 10), 5);
  CHECK(deep.exit_code == 2);
  CHECK_MESSAGE(Contains(deep.err, "$.pipeline.stages: 5 is more than model.n_layer 4"), deep.err);
}

// Every printed loss of `got` within a relative `tolerance` of `want`'s.
void CheckLossesClose(const std::vector<std::string>& got, const std::vector<std::string>& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(std::stod(got[i]) == doctest::Approx(std::stod(want[i])).epsilon(tolerance));
  }
}

TEST_CASE("A worker of 2 stages x 2 tensor ranks killed after step 4 comes back from the agents' memory with no "
          "step lost") {
  Job job;
  const std::string config =
      job.Config("snap", R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})", 4);
  const ProcessResult whole = job.Run(config, 4);
  REQUIRE_MESSAGE(whole.exit_code == 0, whole.out << whole.err);
  const std::vector<std::string> want = Losses(whole.out);
  REQUIRE(want.size() == 7);
  // Rank 1 (stage 0, tensor rank 1) killed once step 4 is done: snapshots every step, the key left out.
  const ProcessResult r = RunProcess({kLauncher, "--log_dir", job.dir.path() + "/logs", "--nproc_per_node", "4",
                                      "--max_restarts", "1", "--grace_period", "2", "--export",
                                      "DSLAUNCH_CRASH_AFTER_STEP=1@4", config},
                                     kJobTimeout, {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"});
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(Contains(r.err, "rank 1 on host localhost exited with signal 9 (SIGKILL); restarting"));
  CHECK(Contains(r.out, "[rank 0] snapshots: every step into the agent's memory"));
  CHECK(Contains(r.out, "[rank 0] restart: resumed from the in-memory snapshot at step 4 (saved by 4 ranks as 2 "
                        "stages x 1 data x 2 tensor at ZeRO stage 1, fp32; "));
  CHECK(Losses(r.out) == want);  // steps 1-4, then 5-6 and the validation: none run twice
}

TEST_CASE("tensor_parallel.autotp_size: 2 tensor ranks x 2 copies, and 2 stages x 2 copies x 2 tensor ranks on 8 "
          "ranks, follow the data-parallel run's losses") {
  Job job;
  const ProcessResult dp2 = job.Run(job.Config("dp2", "", 8), 2);
  REQUIRE_MESSAGE(dp2.exit_code == 0, dp2.out << dp2.err);
  const std::vector<std::string> want = Losses(dp2.out);
  REQUIRE(want.size() == 7);
  const ProcessResult tp2 = job.Run(job.Config("tp2", R"("tensor_parallel": {"autotp_size": 2})", 8), 4);
  REQUIRE_MESSAGE(tp2.exit_code == 0, tp2.out << tp2.err);
  // The partial products summed over the tensor group reassociate fp32 sums (docs/parallelism.md,
  // "Tolerance"): within a relative 1e-5, a few units of the sixth printed digit.
  CheckLossesClose(Losses(tp2.out), want, 1e-5);
  const auto grid = GridLines(tp2.out);
  REQUIRE(grid.size() == 4);
  CHECK(grid.at(1) == "grid: stage 0/1 (blocks 0-3 of 4), data 0/2, tensor 1/2");
  CHECK(grid.at(2) == "grid: stage 0/1 (blocks 0-3 of 4), data 1/2, tensor 0/2");

  const ProcessResult three_d = job.Run(
      job.Config("3d", R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})", 8), 8);
  REQUIRE_MESSAGE(three_d.exit_code == 0, three_d.out << three_d.err);
  CheckLossesClose(Losses(three_d.out), want, 1e-5);
  const auto grid8 = GridLines(three_d.out);
  REQUIRE(grid8.size() == 8);
  CHECK(grid8.at(5) == "grid: stage 1/2 (blocks 2-3 of 4), data 0/2, tensor 1/2, 1f1b schedule");
}

TEST_CASE("--dry-run gives each rank of a pipelined, tensor-parallel train.json the coordinates its worker prints") {
  Job job;
  const std::string config =
      job.Config("3d", R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})", 8);
  const ProcessResult plan =
      RunProcess({kLauncher, "--dry-run", "--nproc_per_node", "8", config}, kJobTimeout);
  REQUIRE_MESSAGE(plan.exit_code == 0, plan.out << plan.err);
  CHECK(Contains(plan.out, "grid 2 stages x 2 data x 2 tensor (train.json's pipeline and tensor_parallel)\n"));
  // Rank 5: stage 1, data 0, tensor 1, as its worker's line says in the run above.
  CHECK(Contains(plan.out, "5     5      1/0/1              "));
  CHECK_FALSE(Contains(plan.out, "[rank"));  // nothing started
  const ProcessResult odd = RunProcess({kLauncher, "--dry-run=json", "--nproc_per_node", "6", config}, kJobTimeout);
  REQUIRE_MESSAGE(odd.exit_code == 0, odd.out << odd.err);
  CHECK(Contains(odd.out, R"("grid_error": "pipeline.stages 2 x tensor_parallel.autotp_size 2 = 4 ranks per model )"
                          R"(copy does not divide the 6 ranks of the job)"));
}

TEST_CASE("A checkpoint of 2 stages x 2 copies x 2 tensor ranks resumes on 2 data-parallel ranks, and exports") {
  Job job;
  const std::string grid = R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})";
  const ProcessResult saved =
      job.Run(job.Config("3d", grid + std::string(R"(, "checkpoint": {"dir": "ckpt", "interval": 3})"), 8), 8);
  REQUIRE_MESSAGE(saved.exit_code == 0, saved.out << saved.err);
  const std::vector<std::string> whole = Losses(saved.out);
  REQUIRE(whole.size() == 7);
  const std::string step3 = job.dir.path() + "/ckpt/global_step3";
  const ProcessResult resumed = job.Run(
      job.Config("dp2", R"("checkpoint": {"dir": "ckpt2", "load": ")" + step3 + R"("})", 8), 2);
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.out << resumed.err);
  CHECK_MESSAGE(Contains(resumed.out, "resumed from " + step3 + " at step 3 (saved by 8 ranks as 2 stages x 2 data x "
                                      "2 tensor at ZeRO stage 1, fp32;"),
                resumed.out);
  // Steps 4-6 and the validation: the 8 ranks' run's, within fp32 reassociation.
  CheckLossesClose(Losses(resumed.out), std::vector<std::string>(whole.begin() + 3, whole.end()), 1e-5);

  const ProcessResult exported =
      RunProcess({std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-worker", "export", job.dir.path() + "/ckpt",
                  job.dir.path() + "/out/model.safetensors", "--hf_config", "--config", job.dir.path() + "/3d.json"},
                 kJobTimeout);
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.out << exported.err);
  std::ifstream config_json(job.dir.path() + "/out/config.json");
  const std::string text{std::istreambuf_iterator<char>(config_json), std::istreambuf_iterator<char>()};
  CHECK_MESSAGE(Contains(text, "\"n_head\": 2"), text);
}

TEST_CASE("The status page of a job of 2 stages x 2 tensor ranks gives the grid and each rank's place in it") {
  Job job;
  const std::string config = job.Config("page", R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})",
                                        2, R"("n_layer": 4, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 32)",
                                        1000000);
  Subprocess launcher({kLauncher, "--job_id", "grid-page", "--status_port", "0", "--nproc_per_node", "4", config},
                      {"TMPDIR=" + job.dir.path(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"});
  std::optional<launcher::JobStateRecord> record;
  REQUIRE(WaitFor([&] {
    auto records = launcher::ReadJobStates(launcher::JobStateDir(job.dir.path(), ::getuid()));
    if (records.ok() && !records->empty()) record = records->front();
    return record.has_value();
  }, kJobTimeout));
  nlohmann::json view;
  const bool shown = WaitFor([&] {
    auto got = launcher::HttpGet(record->url, record->token, "/api/job");
    if (!got.ok() || got->status != 200) return false;
    view = nlohmann::json::parse(got->body);
    // Every rank past its second step: each printed its grid line before its first.
    if (view["ranks"].size() != 4) return false;
    for (const auto& rank : view["ranks"]) {
      if (!rank["last_step"].is_number_integer() || rank["last_step"].get<int64_t>() < 2) return false;
    }
    return true;
  }, kJobTimeout);
  launcher.Signal(SIGTERM);
  const ProcessResult end = launcher.Wait(kJobTimeout);
  REQUIRE_MESSAGE(shown, view.dump() << end.out << end.err);
  CHECK(view["grid"] == nlohmann::json({{"pipeline", 2}, {"data", 1}, {"tensor", 2}}));
  // As the workers print it: rank 1 is stage 0, tensor 1; rank 2 stage 1, tensor 0.
  CHECK(view["ranks"][1]["grid"] == nlohmann::json({{"stage", 0}, {"data", 0}, {"tensor", 1}}));
  CHECK(view["ranks"][2]["grid"] == nlohmann::json({{"stage", 1}, {"data", 0}, {"tensor", 0}}));
  const auto grid = GridLines(end.out);
  REQUIRE_MESSAGE(grid.count(2) == 1, end.out << end.err);
  CHECK(grid.at(2).starts_with("grid: stage 1/2 (blocks 2-3 of 4), data 0/1, tensor 0/2"));
}

TEST_CASE("A tensor split that does not fit the model or the job is refused before training, naming the key") {
  Job job;
  const ProcessResult heads = job.Run(job.Config("heads", R"("tensor_parallel": {"autotp_size": 3})", 2), 3);
  CHECK(heads.exit_code == 2);
  CHECK_MESSAGE(Contains(heads.err, "$.tensor_parallel.autotp_size: 3 tensor ranks cannot share model.n_head 2 heads "
                                    "evenly"),
                heads.err);
  const ProcessResult odd = job.Run(
      job.Config("odd", R"("pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})", 6), 6);
  CHECK(odd.exit_code == 2);
  CHECK_MESSAGE(Contains(odd.err, "$.tensor_parallel.autotp_size: pipeline.stages 2 x tensor_parallel.autotp_size 2 "
                                  "= 4 ranks per model copy does not divide the 6 ranks of the job"),
                odd.err);
}

}  // namespace
}  // namespace dslaunch::testing
