// The bundled runtime surviving faults on the namespaced test cluster (docs/elastic.md): real sshd,
// real Gloo between the nodes, periodic checkpoints. A worker killed with SIGKILL, a worker
// stopped with SIGSTOP (a hang), and a node cut off with `ip link set ... down` and brought back.
#include <arpa/inet.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/data/token_shard.h"
#include "tests/support/cluster.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
constexpr std::chrono::seconds kRunTimeout{240};

// A small gpt on a synthetic token stream: 4 ranks of micro-batch 2 make the global batch of 8;
// a checkpoint every 10 steps into DIR/ckpt; validation at the end.
std::string WriteConfig(const TempDir& dir, int steps, const std::string& extra_train = "",
                        const std::string& extra_checkpoint = "", int batch = 8) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/tokens.bin", tokens).ok());
  const std::string path = dir.path() + "/train.json";
  std::ofstream(path) << R"({"train_batch_size": )" << batch << R"(, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.01}},
    "zero_optimization": {"stage": 1}, "steps_per_print": 1, "seed": 5,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 32},
    "data": {"train": "tokens.bin", "val": "tokens.bin"},
    "checkpoint": {"dir": ")" << dir.path() << R"(/ckpt", "interval": 10)" << extra_checkpoint << R"(},
    "train": {"steps": )" << steps << R"(, "eval_steps": 4)" << extra_train << "}}";
  return path;
}

std::vector<std::string> Launch(const Cluster& c, const TempDir& dir, const std::string& job_id,
                                std::vector<std::string> options, int nodes = 2) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "5",
                                   "--heartbeat_timeout", "2", "--job_id", job_id, "--num_nodes",
                                   std::to_string(nodes)};
  for (auto& o : c.SshOptions()) argv.push_back(o);
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(dir.path() + "/train.json");
  return argv;
}

// Rank 0's "step N | loss X" lines, by step, the last generation's value winning.
std::map<int, std::string> LossesByStep(const std::string& out) {
  std::map<int, std::string> losses;
  std::regex line(R"(\[rank 0[^\]]*\] step (\d+) \| loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    losses[std::stoi((*it)[1])] = (*it)[2];
  }
  return losses;
}

double FinalValidationLoss(const std::string& out) {
  std::regex line(R"(validation loss ([0-9.]+))");
  double last = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    last = std::stod((*it)[1]);
  }
  return last;
}

// The highest step in rank 0's metrics.jsonl so far.
int LastMetricsStep(const TempDir& dir, const std::string& job_id) {
  const std::string m = ReadWhole(dir.path() + "/logs/" + job_id + "/metrics.jsonl");
  std::regex step(R"("step":(\d+))");
  int last = -1;
  for (auto it = std::sregex_iterator(m.begin(), m.end(), step); it != std::sregex_iterator(); ++it) {
    last = std::max(last, std::stoi((*it)[1]));
  }
  return last;
}

// The pid of dslaunch-worker rank `rank` of the job's generation 0 (the namespaces share this
// machine's PID space); 0 if none.
pid_t WorkerPid(const std::string& job_id, int rank) {
  pid_t found = 0;
  DIR* d = ::opendir("/proc");
  while (d != nullptr && found == 0) {
    dirent* e = ::readdir(d);
    if (e == nullptr) break;
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    if (!Contains(ReadWhole(base + "/cmdline"), "dslaunch-worker")) continue;
    std::string env = ReadWhole(base + "/environ");
    for (char& ch : env) ch = ch == '\0' ? '\n' : ch;
    env = "\n" + env;
    if (Contains(env, "\nDSLAUNCH_JOB_ID=" + job_id + "\n") && Contains(env, "\nRANK=" + std::to_string(rank) + "\n") &&
        Contains(env, "\nDSLAUNCH_RESTART_COUNT=0\n")) {
      found = static_cast<pid_t>(pid);
    }
  }
  if (d != nullptr) ::closedir(d);
  return found;
}

constexpr int kSteps = 60;
// Long enough for the lost node to come back and be taken in again before the end.
constexpr int kShrinkSteps = 400;

// One uninterrupted run of the same config on the same 2 nodes x 2 slots, for comparison.
ProcessResult Reference(const Cluster& c, int steps = kSteps) {
  TempDir dir;
  WriteConfig(dir, steps);
  return RunProcess(Launch(c, dir, "elastic-train-reference", {}), kRunTimeout);
}

// The losses of the uninterrupted run of kSteps on 2 nodes x 2 slots, by step.
std::map<int, std::string> ReferenceLosses(const Cluster& c) {
  auto reference = Reference(c);
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  auto expected = LossesByStep(reference.out);
  REQUIRE(expected.size() == kSteps);
  return expected;
}

TEST_CASE("Training goes on after a worker is killed and after a worker hangs, on the same nodes, bitwise") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  const auto expected = ReferenceLosses(*c);

  // With in-memory snapshots (the default with --max_restarts) every rank comes back from its
  // agent's memory at the newest step all completed; without (snapshot_interval 0), from the
  // checkpoint of step 10.
  struct Fault {
    const char* name;
    int signal;
    std::string train_extra;
    bool snapshots;
  };
  for (const Fault& fault : {Fault{"kill", SIGKILL, "", true}, Fault{"hang", SIGSTOP, R"(, "watchdog_timeout": 3)", true},
                             Fault{"kill-disk", SIGKILL, "", false}}) {
    CAPTURE(fault.name);
    TempDir dir;
    WriteConfig(dir, kSteps, fault.train_extra, fault.snapshots ? "" : R"(, "snapshot_interval": 0)");
    const std::string job = std::string("elastic-train-") + fault.name;
    Subprocess launcher(Launch(*c, dir, job, {"--max_restarts", "1"}));
    // After the checkpoint of step 10 and before the one of step 20: from the disk, generation 1
    // resumes at 10.
    REQUIRE(WaitFor([&] { return LastMetricsStep(dir, job) >= 13; }, std::chrono::seconds(120)));
    const pid_t victim = WorkerPid(job, 3);  // on node 1
    REQUIRE(victim > 0);
    REQUIRE(::kill(victim, fault.signal) == 0);
    auto r = launcher.Wait(kRunTimeout);
    if (fault.signal == SIGSTOP) ::kill(victim, SIGKILL);  // in case the watchdog missed it
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    if (fault.signal == SIGSTOP) {
      // Its peers stalled too, waiting for it in a collective; it is the one found stopped.
      CHECK(Contains(r.err, "dslaunch: generation 0: rank 3 on host " + c->Addr(1) + " reported no progress for "));
      CHECK(Contains(r.err, "watchdog timeout 3.0 s"));
    } else {
      CHECK(Contains(r.err, "dslaunch: generation 0: rank 3 on host " + c->Addr(1) + " exited with signal 9 (SIGKILL)"));
    }
    if (fault.snapshots) {
      std::smatch m;
      REQUIRE(std::regex_search(r.out, m, std::regex(R"(restart: resumed from the in-memory snapshot at step (\d+) )"
                                                     R"(\(saved by 4 ranks at ZeRO stage 1, fp32; )")));
      // The newest step every rank completed: the fault came after step 13 was seen in metrics.jsonl,
      // and the victim's snapshot of it is taken as its step ends.
      CHECK(std::stoi(m[1]) >= 12);
    } else {
      CHECK(Contains(r.out, "restart: resumed from " + dir.path() + "/ckpt/global_step10 at step 10"));
    }
    // Same world size, same checkpoint: every loss after the restart is the uninterrupted run's.
    const auto losses = LossesByStep(r.out);
    REQUIRE(losses.size() == kSteps);
    for (int step = 11; step <= kSteps; ++step) {
      CAPTURE(step);
      CHECK(losses.at(step) == expected.at(step));
    }
  }
}

TEST_CASE("Training shrinks to the node left when one is cut off, takes it back when it answers, and ends near an "
          "uninterrupted run") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  auto reference = Reference(*c, kShrinkSteps);
  REQUIRE_MESSAGE(reference.exit_code == 0, reference.err);
  const double expected_val = FinalValidationLoss(reference.out);
  REQUIRE(expected_val > 0);

  TempDir dir;
  WriteConfig(dir, kShrinkSteps);
  const std::string job = "elastic-train-shrink";
  // A probe of the cut-off node fails within a second rather than a TCP connect's minutes.
  Subprocess launcher(Launch(*c, dir, job, {"--nnodes", "1:2", "--max_restarts", "1", "--ssh_connect_timeout", "1"}));
  REQUIRE(WaitFor([&] { return LastMetricsStep(dir, job) >= 13; }, std::chrono::seconds(120)));
  {
    LinkGuard guard(*c, 1);
    REQUIRE(SetLink(*c, 1, false));
    // Generation 1 runs on node 0 alone (2 ranks, accumulation 2): wait for its first steps.
    REQUIRE(WaitFor([&] { return Contains(ReadWhole(dir.path() + "/logs/" + job + "/metrics.jsonl"),
                                          "\"event\":\"generation\",\"generation\":1"); },
                    std::chrono::seconds(60)));
  }  // link back up: the re-probe finds node 1 and the job scales up at a step boundary
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: generation 0: node " + c->Addr(1) + " lost (no heartbeat for "));
  CHECK(Contains(r.err, "continuing on 1 node"));
  CHECK(Contains(r.out, "batch: train_batch_size 8 = micro-batch 2 x accumulation 2 x world size 2"));
  // Node 0 held the copies of node 1's snapshots: the 2 ranks left resume from memory, resharded
  // from the 4 that saved it, at the newest step every rank completed.
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex(R"(restart: resumed from the in-memory snapshot at step (\d+) )"
                                                         R"(\(saved by 4 ranks at ZeRO stage 1, fp32; )")),
                  r.out);
  CHECK(std::stoi(m[1]) >= 12);
  const std::string metrics = ReadWhole(dir.path() + "/logs/" + job + "/metrics.jsonl");
  CHECK(Contains(metrics, "\"event\":\"generation\",\"generation\":2,\"world_size\":4"));
  // Another world size sums gradients in another order; the run redoes the steps after the last
  // checkpoint. The final validation loss stays within 1% of the uninterrupted run's.
  const double val = FinalValidationLoss(r.out);
  CHECK(std::abs(val - expected_val) <= 0.01 * expected_val);
}

TEST_CASE("checkpoint.snapshot_replicas: a node cut off comes back onto the spare from the copy of its snapshots on "
          "its peer, bitwise, and with 0 from the disk") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  const auto expected = ReferenceLosses(*c);
  for (const bool copies : {true, false}) {
    CAPTURE(copies);
    // Nodes 0 and 1 run, node 2 waits as the spare. Node 1's snapshots are copied to node 0.
    TempDir dir;
    WriteConfig(dir, kSteps, "", copies ? "" : R"(, "snapshot_replicas": 0)");
    const std::string job = copies ? "elastic-train-spare" : "elastic-train-spare-no-copies";
    Subprocess launcher(Launch(*c, dir, job, {"--nnodes", "2:2", "--max_restarts", "1"}, 3));
    REQUIRE(WaitFor([&] { return LastMetricsStep(dir, job) >= 13; }, std::chrono::seconds(120)));
    LinkGuard guard(*c, 1);
    REQUIRE(SetLink(*c, 1, false));
    auto r = launcher.Wait(kRunTimeout);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(Contains(r.err, "dslaunch: generation 0: node " + c->Addr(1) + " lost (no heartbeat for "));
    CHECK(Contains(r.out, "[rank 2 " + c->Addr(2) + "]"));  // the spare runs node 1's ranks
    int resumed = 10;
    if (copies) {
      CHECK(Contains(r.out, "snapshots: every step into the agent's memory (checkpoint.snapshot_interval left out: the "
                            "job can restart), each copied to 1 peer node"));
      std::smatch m;
      REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex(R"(restart: resumed from the in-memory snapshot at step (\d+) )"
                                                             R"(\(saved by 4 ranks at ZeRO stage 1, fp32; )")),
                      r.out);
      resumed = std::stoi(m[1]);
      CHECK(resumed >= 12);
    } else {
      CHECK(Contains(r.out, "not copied to a peer node (checkpoint.snapshot_replicas is 0)"));
      CHECK(Contains(r.out, " on 4 ranks, lacks the snapshots of ranks 2, 3 (lost with their nodes, or never completed)"));
      CHECK(Contains(r.out, "restart: resumed from " + dir.path() + "/ckpt/global_step10 at step 10"));
    }
    // The same world size: every loss after the restart is the uninterrupted run's.
    const auto losses = LossesByStep(r.out);
    REQUIRE(losses.size() == kSteps);
    for (int step = resumed + 1; step <= kSteps; ++step) {
      CAPTURE(step);
      CHECK(losses.at(step) == expected.at(step));
    }
  }
}

// Whether node `node`'s sshd answers a TCP connection now (a link just brought back up may take a
// moment).
bool SshAnswers(const Cluster& c, int node) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(22);
  ::inet_pton(AF_INET, c.Addr(node).c_str(), &addr.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

TEST_CASE("A node lost together with the node holding the copy of its snapshots comes back from the disk") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  for (int node : {0, 1, 2}) REQUIRE(WaitFor([&] { return SshAnswers(*c, node); }, std::chrono::seconds(30)));
  {
    // Nodes 0, 1 and 2 in a ring of copies (0 to 1, 1 to 2, 2 to 0): nodes 1 and 2 cut off together
    // take node 1's snapshots and their only copy with them. Node 0 goes on alone, from the disk.
    TempDir dir;
    WriteConfig(dir, kSteps, "", "", /*batch=*/12);
    const std::string job = "elastic-train-both-lost";
    Subprocess launcher(Launch(*c, dir, job, {"--nnodes", "1:3", "--max_restarts", "3", "--ssh_connect_timeout", "1"}, 3));
    REQUIRE(WaitFor([&] { return LastMetricsStep(dir, job) >= 13; }, std::chrono::seconds(120)));
    LinkGuard guard1(*c, 1), guard2(*c, 2);
    REQUIRE(SetLink(*c, 1, false));
    REQUIRE(SetLink(*c, 2, false));
    // Until node 0 runs alone: then the links may come back without the job taking the nodes in
    // before its end.
    REQUIRE(WaitFor([&] { return Contains(ReadWhole(dir.path() + "/logs/" + job + "/metrics.jsonl"),
                                          "\"world_size\":2"); },
                    std::chrono::seconds(90)));
    auto r = launcher.Wait(kRunTimeout);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(Contains(r.out, "restart: no complete in-memory snapshot (the newest, of step "));
    CHECK(Contains(r.out, " on 6 ranks, lacks the snapshots of ranks 2, 3"));
    CHECK(Contains(r.out, "restart: resumed from " + dir.path() + "/ckpt/global_step10 at step 10"));
  }
}

}  // namespace
}  // namespace dslaunch::testing
