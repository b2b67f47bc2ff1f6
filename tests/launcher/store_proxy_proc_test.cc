// Proc tests of the store proxy with the real binaries (docs/protocol.md, "Store proxy"): dslaunch,
// dslaunch-agent and workers (env_check, rank-hello, dslaunch-worker) through each node's proxy,
// and directly with --store_proxy off. The "stale worker" and "gone agent" cases use the test
// process itself as a worker: it takes a real worker's DSLAUNCH_* environment and secret file
// (the real workers die with their agent, PR_SET_PDEATHSIG, so only a process that escaped them
// could still call).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/auth/secret.h"
#include "common/store/store_client.h"
#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{90};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> EnvironOf(pid_t pid) {
  std::map<std::string, std::string> env;
  std::string all = ReadWhole("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream in(all);
  for (std::string kv; std::getline(in, kv, '\0');) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

pid_t ParentOf(pid_t pid) {
  std::istringstream in(ReadWhole("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::stol(line.substr(5)));
  }
  return -1;
}

pid_t PidFromFile(const std::string& path) {
  std::string text = ReadWhole(path);
  return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
}

std::vector<std::string> EnvCheckJob(const TempDir& dir, std::vector<std::string> options, std::vector<std::string> args) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--no_python");
  argv.push_back(kBin + "/env_check");
  argv.push_back("--pid_dir");
  argv.push_back(dir.path());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// A worker's store configuration, as the worker with this pid has it.
StoreConfig ConfigOfWorker(pid_t worker) {
  auto env = EnvironOf(worker);
  auto secret = ReadSecretFile(env["DSLAUNCH_STORE_SECRET_FILE"]);
  REQUIRE_MESSAGE(secret.ok(), secret.status().ToString());
  return StoreConfig{env["DSLAUNCH_STORE"], env["DSLAUNCH_JOB_ID"], std::stoi(env["DSLAUNCH_RESTART_COUNT"]), *secret};
}

TEST_CASE("Workers reach the store through their node's proxy by default and directly with --store_proxy off") {
  for (auto [mode, prefix] : {std::pair{"on", "unix:"}, {"off", "127.0.0.1:"}}) {
    CAPTURE(mode);
    TempDir dir;
    auto r = RunProcess(EnvCheckJob(dir, {"--store_proxy", mode, "--nproc_per_node", "8"},
                                    {"--expect_world", "8", "--expect_store_prefix", prefix}),
                        kRunTimeout);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    for (int rank = 0; rank < 8; ++rank) {
      CHECK(Contains(r.out, "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + " of 8: environment ok"));
    }
  }
}

// Sockets the process holds (listening, connected, either family).
int SocketsOf(pid_t pid) {
  int n = 0;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

// How many rank*.stdout.log files under `dir` hold `text`.
int LogsContaining(const std::string& dir, const std::string& text) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank", 0) == 0 && name.find(".stdout.log") != std::string::npos &&
        Contains(ReadWhole(e.path().string()), text)) {
      ++n;
    }
  }
  return n;
}

TEST_CASE("Through the proxy the launcher holds one connection for a node of 8 ranks, not 9") {
  std::map<std::string, int> sockets;
  for (const char* mode : {"on", "off"}) {
    CAPTURE(mode);
    TempDir dir;
    // Every rank meets the others and then hangs, holding its store connection.
    Subprocess job(EnvCheckJob(dir, {"--store_proxy", mode, "--nproc_per_node", "8"}, {"--hang"}));
    REQUIRE(WaitFor([&] { return LogsContaining(dir.path() + "/logs", "environment ok") == 8; }, std::chrono::seconds(60)));
    sockets[mode] = SocketsOf(job.pid());
    job.Signal(SIGINT);
    job.Wait(kRunTimeout);
  }
  MESSAGE("launcher sockets with 8 ranks on one node: " << sockets["on"] << " through the proxy, " << sockets["off"]
                                                         << " directly");
  // Directly: the agent's connection and one per rank; through the proxy: the agent's connection
  // carries all of them.
  CHECK(sockets["off"] - sockets["on"] == 8);
}

TEST_CASE("A node whose socket path is too long runs its workers on the direct path and says so") {
  TempDir dir;
  const std::string runtime_dir = dir.path() + "/" + std::string(100, 'r');
  REQUIRE(::mkdir(runtime_dir.c_str(), 0700) == 0);
  auto r = RunProcess(EnvCheckJob(dir, {"--nproc_per_node", "2"}, {"--expect_store_prefix", "127.0.0.1:"}), kRunTimeout,
                      {"TMPDIR=" + runtime_dir});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "store proxy off on this node, its workers reach the launcher directly: the store proxy's socket path"));
  CHECK(Contains(r.err, "a Unix socket allows"));
}

TEST_CASE("rank-hello meets at the barrier through the proxy and without it") {
  for (const char* mode : {"on", "off"}) {
    CAPTURE(mode);
    TempDir dir;
    auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--store_proxy", mode, "--nproc_per_node", "4",
                         "--no_python", kBin + "/rank-hello"},
                        kRunTimeout);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    for (int rank = 0; rank < 4; ++rank) {
      CHECK(Contains(r.out, "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + "/4 "));
    }
    CHECK(Contains(r.out, "met 4 ranks at the store barrier"));
  }
}

TEST_CASE("The bundled runtime trains the same on 2 ranks through the proxy and without it") {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  std::ofstream(dir.path() + "/tiny.json") << R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}, "steps_per_print": 1, "seed": 3,
    "zero_optimization": {"stage": 2},
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "train": {"steps": 4}
  })";
  std::map<std::string, std::vector<std::string>> losses;
  for (const char* mode : {"on", "off"}) {
    CAPTURE(mode);
    auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--store_proxy", mode, "--nproc_per_node", "2",
                         dir.path() + "/tiny.json"},
                        std::chrono::seconds(120));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::regex line(R"(\[rank 0\] step \d+ \| loss ([0-9.]+))");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it) {
      losses[mode].push_back((*it)[1]);
    }
    CHECK(losses[mode].size() == 4);
  }
  CHECK(losses["on"] == losses["off"]);
}

TEST_CASE("A worker of an old generation cannot use its node's proxy to reach the new generation") {
  TempDir dir;
  // Generation 0's ranks hang after the barrier; rank 1 is killed, the job restarts as generation
  // 1 (same agent, same proxy socket), whose ranks hang too until the test ends the job.
  Subprocess job(EnvCheckJob(dir, {"--nproc_per_node", "2", "--max_restarts", "1"}, {"--hang", "--until_generation", "2"}));
  REQUIRE(WaitFor([&] { return PidFromFile(dir.path() + "/rank0.pid") > 0 && PidFromFile(dir.path() + "/rank1.pid") > 0; },
                  std::chrono::seconds(30)));
  const StoreConfig old_config = ConfigOfWorker(PidFromFile(dir.path() + "/rank0.pid"));
  REQUIRE(old_config.generation == 0);
  REQUIRE(old_config.address.rfind("unix:", 0) == 0);
  auto stale = StoreClient::Connect(old_config, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  REQUIRE(stale.ok());
  REQUIRE((*stale)->Set("probe", "gen0").ok());
  ::kill(PidFromFile(dir.path() + "/rank1.pid"), SIGKILL);
  REQUIRE(WaitFor([&] { return PidFromFile(dir.path() + "/rank0.gen1.pid") > 0 && PidFromFile(dir.path() + "/rank1.gen1.pid") > 0; },
                  std::chrono::seconds(30)));
  const StoreConfig new_config = ConfigOfWorker(PidFromFile(dir.path() + "/rank0.gen1.pid"));
  CHECK(new_config.address == old_config.address);  // the same node, the same proxy
  CHECK(new_config.generation == 1);
  // The old connection was closed when generation 1 began; reconnecting is refused as stale.
  Status set = (*stale)->Set("probe", "stale");
  CHECK(set.code() == StatusCode::kUnavailable);
  Status again = (*stale)->Set("probe", "stale");
  INFO(again.ToString());
  CHECK(again.code() == StatusCode::kAborted);
  auto fresh = StoreClient::Connect(old_config, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  CHECK(fresh.status().code() == StatusCode::kAborted);
  // Generation 1 sees nothing of generation 0.
  auto current = StoreClient::Connect(new_config, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  REQUIRE(current.ok());
  CHECK((*current)->Get("probe", std::chrono::milliseconds(0)).status().code() == StatusCode::kDeadlineExceeded);
  job.Signal(SIGINT);
  job.Wait(kRunTimeout);
}

TEST_CASE("The proxy dies with its agent, and a worker's next call names the gone proxy") {
  TempDir dir;
  Subprocess job(EnvCheckJob(dir, {"--nproc_per_node", "2"}, {"--hang"}));
  REQUIRE(WaitFor([&] { return PidFromFile(dir.path() + "/rank0.pid") > 0; }, std::chrono::seconds(30)));
  const pid_t worker = PidFromFile(dir.path() + "/rank0.pid");
  const StoreConfig config = ConfigOfWorker(worker);
  const pid_t agent = ParentOf(worker);
  REQUIRE(Contains(ReadWhole("/proc/" + std::to_string(agent) + "/cmdline"), "dslaunch-agent"));
  auto client = StoreClient::Connect(config, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  REQUIRE(client.ok());
  REQUIRE((*client)->Set("k", "v").ok());
  ::kill(agent, SIGKILL);
  REQUIRE(WaitFor([&] { return !ProcessAlive(agent); }, std::chrono::seconds(10)));
  Status broken = (*client)->Set("k", "w");
  CHECK(broken.code() == StatusCode::kUnavailable);
  Status gone = (*client)->Set("k", "w");
  INFO(gone.ToString());
  const std::string path = config.address.substr(5);
  CHECK(gone.code() == StatusCode::kUnavailable);
  CHECK(Contains(gone.message(), "the node's store proxy at " + path + " is gone (its dslaunch-agent exited or was killed)"));
  auto r = job.Wait(kRunTimeout);
  CHECK(r.exit_code != 0);  // the node was lost
}

}  // namespace
}  // namespace dslaunch::testing
