// `dslaunch train.json` with "device": "cuda", end to end without a GPU: the real launcher, agents and
// dslaunch-worker, which hands the run to the CUDA worker (DSLAUNCH_CUDA_WORKER, exported by the
// launcher) as it would to dslaunch-worker-cuda; here that is its host stand-in
// (tests/programs/worker_device_stand_in.cc: the device engine and the device GPT on the host
// stand-ins of CUDA, the collectives on the world's Gloo group). Since the stand-in's engine is
// ZeroEngine's to the bit, every printed figure of the run on the "device" and every byte of its
// checkpoint's shard files must be the CPU run's, and checkpoints must move between the two.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/data/token_shard.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
const std::string kStandIn = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-worker-cuda-stand-in";

// The stand-in is built with CUDA (its headers); a build without it has none to hand over to.
#ifdef DSLAUNCH_CUDA_STAND_IN
constexpr bool kHaveStandIn = true;
#else
constexpr bool kHaveStandIn = false;
#endif
#define REQUIRE_STAND_IN() \
  DSLAUNCH_SKIP_UNLESS(kHaveStandIn, "gpu", "built without CUDA (DSLAUNCH_WITH_CUDA=OFF): no CUDA worker stand-in")

// Rank 0's lines with the figures a run prints: steps (loss, norm), the validation and the sample.
std::vector<std::string> Figures(const std::string& out) {
  std::vector<std::string> lines;
  std::regex keep(R"(\[rank 0\] (step \d+ \| (loss [0-9.]+ \| lr \S+ \| loss scale \S+ \| grad norm \S+)|step \d+ \| validation.*|sample:.*))");
  std::smatch m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, keep)) lines.push_back(m[2].matched ? m[2].str() : m[1].str());
  }
  return lines;
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Token shards of a repeating pattern with some noise in DIR: train.bin and val.bin.
void WriteShards(const TempDir& dir) {
  std::vector<uint16_t> train, val;
  for (int i = 0; i < 4000; ++i) train.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 64));
  for (int i = 0; i < 800; ++i) val.push_back(static_cast<uint16_t>((i * 5 + i / 11) % 64));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", train).ok());
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/val.bin", val).ok());
}

// A 2-layer gpt on DIR's shards (WriteShards; paths relative to the config), with `extra` keys.
std::string Config(const std::string& extra) {
  return R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "gradient_clipping": 1.0, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 64},
    "data": {"train": "train.bin", "val": "val.bin", "seq_len": 8},
    "train": {"steps": 5, "eval_interval": 5, "eval_steps": 2, "sample_tokens": 12},
    )" + extra + "}";
}

ProcessResult Launch(const TempDir& dir, const std::string& name, const std::string& text,
                     const std::string& cuda_worker = kStandIn, const std::string& more_env = "") {
  std::ofstream(dir.path() + "/" + name) << text;
  std::vector<std::string> command = {kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2",
                                      "--export", "DSLAUNCH_CUDA_WORKER=" + cuda_worker};
  if (!more_env.empty()) command.insert(command.end(), {"--export", more_env});
  command.push_back(dir.path() + "/" + name);
  return RunProcess(command, std::chrono::seconds(120));
}

TEST_CASE("\"device\": \"cuda\" trains through the CUDA worker's path and prints the CPU run's figures") {
  REQUIRE_STAND_IN();
  TempDir dir;
  WriteShards(dir);
  for (const std::string precision : {R"("bf16": {"enabled": true}, "zero_optimization": {"stage": 2, "reduce_bucket_size": 1500},)",
                                      R"("fp16": {"enabled": true, "initial_scale_power": 12}, "zero_optimization": {"stage": 3},)",
                                      R"("zero_optimization": {"stage": 1},)"}) {
    CAPTURE(precision);
    // Each saves its final checkpoint (the state, as each rank's shard file) in a directory of its own.
    auto saved_in = [&](const std::string& name) { return R"("checkpoint": {"dir": ")" + dir.path() + "/" + name + R"("},)"; };
    std::filesystem::remove_all(dir.path() + "/ckpt-cpu");
    std::filesystem::remove_all(dir.path() + "/ckpt-cuda");
    auto cpu = Launch(dir, "cpu.json", Config(precision + saved_in("ckpt-cpu") + R"("device": "cpu")"));
    INFO(cpu.err);
    REQUIRE(cpu.exit_code == 0);
    auto device = Launch(dir, "cuda.json", Config(precision + saved_in("ckpt-cuda") + R"("device": "cuda")"));
    INFO(device.out);
    INFO(device.err);
    REQUIRE(device.exit_code == 0);
    CHECK(device.out.find("[rank 1] device: cuda:1 (host stand-in)") != std::string::npos);
    CHECK(cpu.out.find("device: cuda") == std::string::npos);
    const std::vector<std::string> want = Figures(cpu.out), got = Figures(device.out);
    CHECK(want.size() == 7);  // 5 steps, the validation, the sample
    CHECK(got == want);
    // The checkpoints' shard files are the same bytes (meta.json differs: it records train.json's hash).
    for (const std::string shard : {"rank00000.safetensors", "rank00001.safetensors"}) {
      CAPTURE(shard);
      const std::string a = FileBytes(dir.path() + "/ckpt-cpu/global_step5/" + shard);
      CHECK(!a.empty());
      CHECK(a == FileBytes(dir.path() + "/ckpt-cuda/global_step5/" + shard));
    }
  }
}

TEST_CASE("a checkpoint the device run saved resumes on the CPU with the figures of a run that never stopped") {
  REQUIRE_STAND_IN();
  TempDir dir;
  WriteShards(dir);
  const std::string bf16 = R"("bf16": {"enabled": true}, "zero_optimization": {"stage": 2},)";
  const std::string ckpt = R"("checkpoint": {"dir": ")" + dir.path() + R"(/ckpt", "load": "auto"},)";
  auto whole = Launch(dir, "whole.json", Config(bf16 + R"("device": "cpu")"));
  REQUIRE(whole.exit_code == 0);
  std::string three = Config(bf16 + ckpt + R"("device": "cuda")");
  three.replace(three.find(R"("steps": 5)"), 10, R"("steps": 3)");
  auto first = Launch(dir, "first.json", three);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  auto rest = Launch(dir, "rest.json", Config(bf16 + ckpt + R"("device": "cpu")"));
  INFO(rest.err);
  REQUIRE(rest.exit_code == 0);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  const std::vector<std::string> want = Figures(whole.out), got = Figures(rest.out);
  REQUIRE(want.size() == 7);
  REQUIRE(got.size() == 4);  // steps 4 and 5, the validation, the sample
  CHECK(std::vector<std::string>(want.begin() + 3, want.end()) == got);
}

TEST_CASE("\"device\": \"cuda\" without a CUDA worker, and a value that is no device, are refused naming the key") {
  TempDir dir;
  WriteShards(dir);
  auto missing = Launch(dir, "cuda.json", Config(R"("device": "cuda")"), dir.path() + "/no-such-worker");
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find("device \"cuda\": no CUDA worker at " + dir.path() + "/no-such-worker") != std::string::npos);
  auto bogus = Launch(dir, "bogus.json", Config(R"("device": "tpu")"));
  CHECK(bogus.exit_code != 0);
  CHECK(bogus.err.find(R"x($.device: expected one of auto, cpu, cuda, got "tpu")x") != std::string::npos);
}

TEST_CASE("the CUDA worker refuses a run the device does not train and one its memory cannot hold") {
  REQUIRE_STAND_IN();
  TempDir dir;
  WriteShards(dir);
  const std::string split = Config(R"("pipeline": {"stages": 2}, "device": "cuda")");
  auto pipeline = Launch(dir, "pipeline.json", split);
  CHECK(pipeline.exit_code != 0);
  CHECK(pipeline.err.find("device \"cuda\": pipeline.stages") != std::string::npos);
  // A "device" of 64 KiB: the engine's 7,744 parameters with AdamW do not fit; refused before
  // anything is allocated, by part.
  auto small = Launch(dir, "small.json", Config(R"("device": "cuda")"), kStandIn, "DSLAUNCH_STAND_IN_DEVICE_BYTES=65536");
  CHECK(small.exit_code != 0);
  // fp32 at stage 0: 7,744 parameters of 4 bytes each, their gradients, master weights in place
  // and two moments, no buffers.
  INFO(small.err);
  CHECK(small.err.find("device memory: the engine needs 121.0 KiB (parameters 30.2 KiB, gradients 30.2 KiB, "
                       "optimizer state 60.5 KiB, buffers 0.0 KiB)") != std::string::npos);
  CHECK(small.err.find("the device has 64.0 KiB free of 64.0 KiB: use a higher zero_optimization.stage") !=
        std::string::npos);
}

}  // namespace
}  // namespace dslaunch::testing
