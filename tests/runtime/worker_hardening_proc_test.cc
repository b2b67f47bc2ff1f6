// dslaunch-worker under the real launcher when things go wrong: a checkpoint save that fails for
// real (a full file system, a directory that cannot be created), hostile train.json files, and
// the start-up warnings (docs/checkpoint.md, "When a save fails"; docs/train-json.md, "Limits").
#include <doctest/doctest.h>

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

namespace fs = std::filesystem;

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A train.json in DIR named NAME for a small gpt (26,752 parameters: a checkpoint of AdamW state
// is 321 KB) on DIR/train.bin, with `extra` keys (a "checkpoint" section, ...).
std::string WriteConfig(const TempDir& dir, const std::string& name, int steps, const std::string& extra) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"}, "train": {"steps": )"
                      << steps << "}" << extra << "}";
  return path;
}

ProcessResult Launch(const TempDir& dir, const std::string& config, int ranks = 2) {
  return RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", std::to_string(ranks), config},
                    std::chrono::seconds(120));
}

// The pids of the dslaunch-worker processes whose command line holds `argument`.
std::vector<pid_t> WorkersWith(const std::string& argument) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = Slurp(entry.path().string() + "/cmdline");  // NUL-separated
    if (cmdline.find("dslaunch-worker") != std::string::npos && cmdline.find(argument) != std::string::npos) {
      pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return pids;
}

// A tmpfs of `size` on a fresh directory (root only), unmounted by the destructor: a file system
// that really fills up.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& path, const std::string& size) : path_(path) {
    fs::create_directories(path);
    const std::string options = "size=" + size + ",mode=0700";
    if (::mount("dslaunch-test", path.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

TEST_CASE("A full file system at the end-of-run save of an asynchronous run makes the job fail, naming the save") {
  // Before: the save after the last step was a background save whose failure was printed; the job
  // exited 0 and steps 3-4 were lost.
  REQUIRE_MESSAGE(::geteuid() == 0, "mounting a small tmpfs needs root (the proc tier runs as root)");
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  SmallTmpfs tmpfs(ckpt, "480k");  // one checkpoint (321 KB and meta.json) fits, two do not
  REQUIRE_MESSAGE(tmpfs.mounted(), ("mount tmpfs on " + ckpt + ": " + tmpfs.error()));
  const std::string config =
      WriteConfig(dir, "full.json", 4, R"(, "checkpoint": {"dir": "ckpt", "interval": 2, "async": true})");
  ProcessResult r = Launch(dir, config);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("step 2 | checkpoint (async) " + ckpt + "/global_step2") != std::string::npos);
  CHECK(r.err.find("the end-of-run checkpoint of step 4 in " + ckpt + " failed: checkpoint of step 4: write " + ckpt +
                   "/global_step4/rank0000") != std::string::npos);
  CHECK(r.err.find(".safetensors: No space left on device; the last complete checkpoint is " + ckpt +
                   "/global_step2 (step 2), so steps 3-4 are not saved") != std::string::npos);
  CHECK(Slurp(ckpt + "/latest") == "global_step2\n");
  // The failed save's partial directory is removed (before: it stayed, filling the disk).
  CHECK_FALSE(std::filesystem::exists(ckpt + "/global_step4"));
  CHECK(std::filesystem::exists(ckpt + "/global_step2/meta.json"));
}

TEST_CASE("On a full file system periodic asynchronous saves fail without stopping training, and the save on stop fails the job") {
  // Before: the save on stop was asynchronous too, and the job exited 143 as if it had saved.
  REQUIRE_MESSAGE(::geteuid() == 0, "mounting a small tmpfs needs root (the proc tier runs as root)");
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  SmallTmpfs tmpfs(ckpt, "480k");
  REQUIRE_MESSAGE(tmpfs.mounted(), ("mount tmpfs on " + ckpt + ": " + tmpfs.error()));
  const std::string config =
      WriteConfig(dir, "stop.json", 1000000, R"(, "checkpoint": {"dir": "ckpt", "interval": 2, "async": true})");
  Subprocess job({kLauncher, "--log_dir", dir.path() + "/logs", "--job_id", "full", "--nproc_per_node", "2", config});
  const std::string metrics = dir.path() + "/logs/full/metrics.jsonl";
  // Step 2's save completes; step 4's finds the disk full: recorded, and training goes on.
  REQUIRE(WaitFor([&] { return Slurp(metrics).find("\"event\":\"checkpoint_failed\",\"step\":4}") != std::string::npos; },
                  std::chrono::seconds(60)));
  REQUIRE(WaitFor([&] { return Slurp(metrics).find("\"event\":\"step\",\"step\":6,") != std::string::npos; },
                  std::chrono::seconds(60)));
  // The agent's stop, as it sends it: SIGTERM to every worker.
  const std::vector<pid_t> workers = WorkersWith(config);
  REQUIRE(workers.size() == 2);
  for (pid_t pid : workers) ::kill(pid, SIGTERM);
  ProcessResult r = job.Wait(std::chrono::seconds(60));
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 1);  // a worker's exit code: 1, not 143 (stopped after a save)
  CHECK(r.out.find("step 4 | checkpoint FAILED: ") != std::string::npos);
  CHECK(r.err.find("the checkpoint on stop of step ") != std::string::npos);
  CHECK(r.err.find("No space left on device; the last complete checkpoint is " + ckpt + "/global_step2 (step 2)") !=
        std::string::npos);
  CHECK(Slurp(ckpt + "/latest") == "global_step2\n");
}

TEST_CASE("An end-of-run save whose directory cannot be created fails the job, naming the save and the last checkpoint") {
  // As any user, root included: a path component that is a regular file.
  TempDir dir;
  const std::string first = WriteConfig(dir, "first.json", 2, R"(, "checkpoint": {"dir": "ckpt"})");
  ProcessResult saved = Launch(dir, first);
  REQUIRE_MESSAGE(saved.exit_code == 0, saved.err);
  std::ofstream(dir.path() + "/file") << "not a directory";
  const std::string second = WriteConfig(
      dir, "second.json", 4, R"(, "checkpoint": {"dir": "file/ckpt", "load": "ckpt/global_step2", "async": true})");
  ProcessResult r = Launch(dir, second);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("the end-of-run checkpoint of step 4 in " + dir.path() + "/file/ckpt failed: checkpoint: cannot create " +
                   dir.path() + "/file/ckpt/global_step4: Not a directory; the last complete checkpoint is " +
                   dir.path() + "/ckpt/global_step2 (step 2), so steps 3-4 are not saved") != std::string::npos);
}

TEST_CASE("Hostile train.json files end the job with an error that says where, not a crash") {
  TempDir dir;
  const std::string tokens = WriteConfig(dir, "unused.json", 1, "");  // writes train.bin
  struct Case {
    std::string name, text, error;
    int exit_code;  // 2 for a config error (docs/exit-codes.md); 1 for the memory refusal, which depends on the node
  };
  const Case cases[] = {
      // Before: SIGSEGV (exit 139): the recursive copy of 100,000 levels overflowed the stack.
      {"deep.json", std::string(100000, '[') + std::string(100000, ']'), "nesting depth 65 at line 1, column 65", 2},
      // Before: std::bad_alloc (SIGABRT, exit 134) while building the model. A need far past any
      // machine, so that even the unfixed worker fails at its first allocation.
      {"huge.json",
       R"({"train_micro_batch_size_per_gpu": 1048576, "optimizer": {"type": "AdamW"},
          "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 65536},
          "data": {"train": "train.bin"}, "train": {"steps": 1}})",
       "huge.json: model needs about ", 1},
      {"block.json",
       R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"},
          "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 65537},
          "data": {"train": "train.bin"}, "train": {"steps": 1}})",
       "block.json: $.model.block_size: expected an integer 1-65536, got 65537", 2},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::ofstream(dir.path() + "/" + c.name) << c.text;
    ProcessResult r = Launch(dir, dir.path() + "/" + c.name, 1);
    INFO(r.err);
    CHECK(r.exit_code == c.exit_code);
    CHECK(r.err.find(c.error) != std::string::npos);
  }
}

TEST_CASE("Start-up warnings carry one prefix, and the boolean zero_optimization trains at stage 1") {
  // Before: "dslaunch-worker: warning: warning: 1 DeepSpeed key(s) ...", and the boolean form was
  // refused ("$.zero_optimization: expected an object, got true").
  TempDir dir;
  const std::string config =
      WriteConfig(dir, "warn.json", 1, R"(, "wall_clock_breakdown": false, "zero_optimization": true)");
  ProcessResult r = Launch(dir, config, 1);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("dslaunch-worker: warning: 1 DeepSpeed key(s) not implemented here, ignored: "
                   "$.wall_clock_breakdown") != std::string::npos);
  CHECK(r.err.find("dslaunch-worker: warning: " + config + ": $.zero_optimization: the boolean form is deprecated") !=
        std::string::npos);
  CHECK(r.err.find("warning: warning:") == std::string::npos);
  CHECK(r.out.find("(ZeRO stage 1, fp32, world 1)") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::testing
