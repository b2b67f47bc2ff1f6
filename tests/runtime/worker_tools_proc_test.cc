// Settings end to end for dslaunch-worker's tools (docs/testing.md, "Settings end to end"): each
// subcommand's options given on the real program's command line, observed in the files it writes.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/data/idx_data.h"
#include "runtime/data/token_shard.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kWorker = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-worker";
const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr std::chrono::seconds kTimeout{120};

// A safetensors file's JSON header.
json SafetensorsHeader(const std::string& path) {
  const std::string bytes = ReadWhole(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);  // little-endian on every machine this runs on
  REQUIRE(bytes.size() >= 8 + length);
  return json::parse(bytes.substr(8, length));
}

TEST_CASE("prepare-text --val_fraction puts that share of the tokens, from the end, in the --val shard") {
  TempDir dir;
  std::ofstream(dir.path() + "/in.txt") << std::string(1000, 'a');
  auto r = RunProcess({kWorker, "prepare-text", dir.path() + "/in.txt", dir.path() + "/train.bin", "--val",
                       dir.path() + "/val.bin", "--val_fraction", "0.25"},
                      kTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto train = runtime::ReadTokenShard(dir.path() + "/train.bin");
  auto val = runtime::ReadTokenShard(dir.path() + "/val.bin");
  REQUIRE(train.ok());
  REQUIRE(val.ok());
  CHECK(train->size() == 750);
  CHECK(val->size() == 250);
}

TEST_CASE("make-digits --train and --val write that many images and labels") {
  TempDir dir;
  auto r = RunProcess({kWorker, "make-digits", dir.path() + "/digits", "--train", "12", "--val", "5"}, kTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  size_t counted = 0;
  for (const auto& e : fs::directory_iterator(dir.path() + "/digits")) {
    const std::string name = e.path().filename().string();
    if (name.find("images") == std::string::npos) continue;
    auto images = runtime::ReadIdxImages(e.path().string());
    REQUIRE(images.ok());
    CHECK(images->n == (name.starts_with("train") ? 12 : 5));
    ++counted;
  }
  CHECK(counted == 2);
}

TEST_CASE("export --dtype, --hf_config with --n_head or --config: the file's tensor type and config.json's heads") {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::string config = dir.path() + "/train.json";
  std::ofstream(config) << R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003}},
    "model": {"type": "gpt", "n_layer": 1, "n_head": 4, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"}, "train": {"steps": 1}, "checkpoint": {"dir": "ckpt"}})";
  auto trained = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", config}, kTimeout);
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.err);

  const std::string ckpt = dir.path() + "/ckpt";
  auto bf16 = RunProcess({kWorker, "export", ckpt, dir.path() + "/a/model.safetensors", "--dtype", "bf16",
                          "--hf_config", "--n_head", "4"},
                         kTimeout);
  INFO(bf16.err);
  REQUIRE(bf16.exit_code == 0);
  const json header = SafetensorsHeader(dir.path() + "/a/model.safetensors");
  CHECK(header.at("wte.weight").at("dtype") == "BF16");
  CHECK(json::parse(ReadWhole(dir.path() + "/a/config.json")).at("n_head") == 4);

  // The heads from the run's train.json; fp32 is the default type.
  auto from_config = RunProcess({kWorker, "export", ckpt, dir.path() + "/b/model.safetensors", "--hf_config",
                                 "--config", config},
                                kTimeout);
  INFO(from_config.err);
  REQUIRE(from_config.exit_code == 0);
  CHECK(SafetensorsHeader(dir.path() + "/b/model.safetensors").at("wte.weight").at("dtype") == "F32");
  CHECK(json::parse(ReadWhole(dir.path() + "/b/config.json")).at("n_head") == 4);
  // A --n_head that contradicts the train.json is refused, naming both.
  auto contradiction = RunProcess({kWorker, "export", ckpt, dir.path() + "/c/model.safetensors", "--hf_config",
                                   "--config", config, "--n_head", "2"},
                                  kTimeout);
  CHECK(contradiction.exit_code == 1);
  CHECK(Contains(contradiction.err, "n_head 2 differs from " + config + "'s 4"));
  CHECK_FALSE(fs::exists(dir.path() + "/c/model.safetensors"));
}

TEST_CASE("An mlp on IDX images: data.format idx reads data.train and data.train_labels, data.val with "
          "data.val_labels gives the accuracy, model.layers the parameter count") {
  TempDir dir;
  auto digits = RunProcess({kWorker, "make-digits", dir.path() + "/digits", "--train", "64", "--val", "16"}, kTimeout);
  REQUIRE_MESSAGE(digits.exit_code == 0, digits.err);
  const std::string config = dir.path() + "/mlp.json";
  std::ofstream(config) << R"({"train_batch_size": 16, "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
    "steps_per_print": 1, "model": {"type": "mlp", "layers": [784, 16, 10]},
    "data": {"format": "idx", "train": "digits/train-images.idx", "train_labels": "digits/train-labels.idx",
             "val": "digits/val-images.idx", "val_labels": "digits/val-labels.idx"},
    "train": {"steps": 2, "eval_steps": 1}})";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", config}, kTimeout);
  INFO(r.err);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  // 784 x 16 + 16 + 16 x 10 + 10 parameters.
  CHECK(Contains(r.out, "[rank 0] model mlp: 12730 parameters"));
  CHECK(Contains(r.out, "[rank 0] step 2 | validation loss "));
  CHECK(Contains(r.out, " | accuracy "));
}

}  // namespace
}  // namespace dslaunch::testing
