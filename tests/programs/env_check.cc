// env_check: the worker used by the proc tests. It checks the environment contract against what
// the test expects, records its pid, meets the other ranks at a store barrier, and then behaves as
// told (exit with a code, die by a signal, or hang).
//
//   env_check --pid_dir D [--expect_world N] [--expect_local_world N] [--fail_rank R --exit_code C]
//             [--kill_rank R] [--hang] [--ignore_sigterm] [--no_barrier] [--expect_nodes N]
//             [--expect_env NAME=VALUE] [--death_file F] [--escape_dir D] [--check_fds]
//             [--ignore_sigterm_generation G] [--linger_ms N]
// --death_file: the killed rank writes the wall-clock time (ns since the epoch) it dies at, so a
// benchmark can time the teardown that follows.
// --escape_dir: before anything else, start a child that leaves the worker's process group and
// session (setsid) and sleeps until killed; its pid goes to D/escapeeRANK.pid.
// --expect_store_prefix P: DSLAUNCH_STORE must start with P ("unix:" through the node's store
// proxy, "127.0.0.1:" directly).
// --check_fds: fail if any descriptor other than stdin, stdout and stderr was inherited.
// --own_error_rank R: rank R writes an error record of its own failure, waits 500 ms, and exits
// with --exit_code. --peer_error_rank Q: rank Q waits 100 ms, writes a record saying a peer caused
// its failure, and exits 1 at once (the collateral exit that reaches the launcher first).
// --until_generation G: --fail_rank, --kill_rank and --hang act only in generations before G
// (DSLAUNCH_RESTART_COUNT < G); from generation G on every rank meets the barrier and exits 0.
// --code_plus_generation: --fail_rank exits with --exit_code plus the generation (a different
// failure in every generation). Pid files of generation g > 0 are rankR.genG.pid.
// --linger_ms N: from --until_generation on, stay N ms after the barrier before exiting 0 (so
// that a test sampling the processes sees the generation run).
// --ignore_sigterm_generation G: ignore SIGTERM in generation G only (a rank stuck in a
// collective whose peers are gone), so that other generations stop at once.
// --stale_probe F: in generation 0, wait; once running again after having been stopped (SIGSTOP,
// then SIGCONT), try a SET on the old store connection and a new connection, and write both
// results to F (a stale worker of an old generation).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/auth/secret.h"
#include "common/env_names.h"
#include "common/error_record.h"
#include "common/store/store_client.h"
#include "common/worker_identity.h"

extern char** environ;

namespace {

constexpr std::chrono::seconds kBarrierTimeout{60};

int Die(const std::string& what) {
  std::fprintf(stderr, "env_check: %s\n", what.c_str());
  return 99;
}

// Starts a process in a session of its own, as a daemon would, and returns once its pid is
// written to `pid_file`.
std::string StartEscapee(const std::string& pid_file) {
  int ready[2];
  if (::pipe(ready) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(ready[0]);
    ::setsid();
    std::ofstream(pid_file) << ::getpid() << "\n";
    (void)!::write(ready[1], "x", 1);
    ::close(ready[1]);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char c;
  bool ok = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return ok ? "" : "the escapee did not start";
}

// Descriptors above stderr, other than the one listing them, as "N -> target" lines.
// The descriptors above stderr this process inherited, except the snapshot memory its agent gave
// it (`snapshot_fds`, DSLAUNCH_SNAPSHOT_FDS), each of which must be one of the agent's memory files
// for this local rank ("/memfd:dslaunch-snapshot-local<LOCAL_RANK>-<i>").
std::string InheritedDescriptors(const std::string& snapshot_fds, const std::string& local_rank, int* snapshots) {
  std::string found;
  *snapshots = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return "cannot list /proc/self/fd";
  const std::string allowed = "," + snapshot_fds + ",";
  while (dirent* e = ::readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == ::dirfd(d)) continue;
    char target[256] = {};
    std::string link = std::string("/proc/self/fd/") + e->d_name;
    (void)!::readlink(link.c_str(), target, sizeof(target) - 1);
    const bool snapshot = allowed.find("," + std::string(e->d_name) + ",") != std::string::npos &&
                          std::string(target).rfind("/memfd:dslaunch-snapshot-local" + local_rank + "-", 0) == 0;
    if (snapshot) {
      ++*snapshots;
      continue;
    }
    found += std::string(found.empty() ? "" : ", ") + e->d_name + " -> " + target;
  }
  ::closedir(d);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dslaunch;
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return Die("unexpected argument " + a);
    if (a == "--hang" || a == "--ignore_sigterm" || a == "--no_barrier" || a == "--check_fds" ||
        a == "--code_plus_generation") {
      args[a] = "1";
    } else if (i + 1 < argc) {
      args[a] = argv[++i];
    } else {
      return Die("missing value for " + a);
    }
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto id = ParseWorkerIdentity(env);
  if (!id.ok()) return Die(id.status().ToString());

  // The contract's aliases and derived variables must agree with the primary names.
  auto expect_eq = [&](const char* a, const char* b) {
    return env[a] == env[b] ? std::string() : std::string(a) + "=" + env[a] + " but " + b + "=" + env[b];
  };
  for (auto [a, b] : {std::pair{env::kLocalSize, env::kLocalWorldSize}, {env::kGroupRank, env::kNodeRank},
                      {env::kCrossRank, env::kNodeRank}, {env::kGroupWorldSize, env::kNumNodes},
                      {env::kCrossSize, env::kNumNodes}, {env::kTorchElasticRestartCount, env::kRestartCount},
                      {env::kRoleRank, env::kRank}, {env::kRoleWorldSize, env::kWorldSize},
                      {env::kTorchElasticRunId, env::kJobId}}) {
    std::string err = expect_eq(a, b);
    if (!err.empty()) return Die(err);
  }
  if (env[env::kRoleName] != "default") return Die("ROLE_NAME=" + env[env::kRoleName] + ", expected default");
  if (args.count("--expect_world") && std::to_string(id->world_size) != args["--expect_world"]) {
    return Die("WORLD_SIZE=" + std::to_string(id->world_size) + ", expected " + args["--expect_world"]);
  }
  if (args.count("--expect_local_world") &&
      std::to_string(id->local_world_size) != args["--expect_local_world"]) {
    return Die("LOCAL_WORLD_SIZE=" + std::to_string(id->local_world_size) + ", expected " +
               args["--expect_local_world"]);
  }
  if (args.count("--expect_nodes") && std::to_string(id->num_nodes) != args["--expect_nodes"]) {
    return Die("NNODES=" + std::to_string(id->num_nodes) + ", expected " + args["--expect_nodes"]);
  }
  if (args.count("--expect_env")) {
    std::string kv = args["--expect_env"];
    std::string name = kv.substr(0, kv.find('='));
    if (name + "=" + env[name] != kv) return Die(name + "='" + env[name] + "', expected " + kv);
  }
  if (args.count("--expect_store_prefix") && id->store_address.rfind(args["--expect_store_prefix"], 0) != 0) {
    return Die("DSLAUNCH_STORE=" + id->store_address + ", expected it to start with " + args["--expect_store_prefix"]);
  }
  if (env[env::kMasterAddr].empty() || env[env::kMasterPort].empty()) return Die("MASTER_ADDR/PORT unset");
  if (env[env::kOmpNumThreads].empty()) return Die("OMP_NUM_THREADS unset");
  // CUDA_VISIBLE_DEVICES holds the node's slots: as many as local workers.
  std::string cvd = env[env::kCudaVisibleDevices];
  int slots = cvd.empty() ? 0 : 1 + static_cast<int>(std::count(cvd.begin(), cvd.end(), ','));
  if (slots != id->local_world_size) return Die("CUDA_VISIBLE_DEVICES=" + cvd + " does not list every local slot");
  for (const char* name : {env::kJobSecret, "DSLAUNCH_SECRET", "DSLAUNCH_STORE_SECRET"}) {
    if (env.count(name)) return Die(std::string("the secret is in the environment (") + name + ")");
  }
  if (args.count("--check_fds")) {
    int snapshots = 0;
    std::string inherited = InheritedDescriptors(env["DSLAUNCH_SNAPSHOT_FDS"], env[env::kLocalRank], &snapshots);
    if (!inherited.empty()) return Die("inherited descriptors: " + inherited);
    const int asked = env["DSLAUNCH_SNAPSHOT_MEMORY"] == "1" ? 2 : 0;
    if (snapshots != asked) {
      return Die("inherited " + std::to_string(snapshots) + " snapshot memory files, expected " + std::to_string(asked));
    }
  }
  if (args.count("--escape_dir")) {
    std::string err = StartEscapee(args["--escape_dir"] + "/escapee" + std::to_string(id->rank) + ".pid");
    if (!err.empty()) return Die(err);
  }

  // SIGTERM is ignored before the pid file tells a test that this rank is up.
  if (args.count("--ignore_sigterm")) std::signal(SIGTERM, SIG_IGN);
  if (args.count("--ignore_sigterm_generation") &&
      id->generation == std::atoi(args["--ignore_sigterm_generation"].c_str())) {
    std::signal(SIGTERM, SIG_IGN);
  }
  if (args.count("--pid_dir")) {
    const std::string gen = id->generation > 0 ? ".gen" + std::to_string(id->generation) : "";
    std::ofstream(args["--pid_dir"] + "/rank" + std::to_string(id->rank) + gen + ".pid") << ::getpid() << "\n";
  }

  std::unique_ptr<StoreClient> store;
  std::string secret;
  if (!args.count("--no_barrier")) {
    auto read = ReadSecretFile(id->store_secret_file);
    if (!read.ok()) return Die(read.status().ToString());
    secret = *read;
    auto deadline = std::chrono::steady_clock::now() + kBarrierTimeout;
    auto connected = StoreClient::Connect({id->store_address, id->job_id, id->generation, secret}, deadline);
    if (!connected.ok()) return Die(connected.status().ToString());
    store = std::move(*connected);
    Status s = StoreBarrier(*store, "env_check", id->world_size, kBarrierTimeout);
    if (!s.ok()) return Die(s.ToString());
  }
  std::printf("rank %d of %d: environment ok\n", id->rank, id->world_size);
  std::fflush(stdout);

  auto write_record = [&](const std::string& message, bool caused_by_peer) {
    ErrorRecord record{message,
                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count(),
                       caused_by_peer};
    return WriteErrorRecord(env[env::kErrorFile], record);
  };
  if (args.count("--own_error_rank") && std::to_string(id->rank) == args["--own_error_rank"]) {
    if (env[env::kErrorFile].empty()) return Die("TORCHELASTIC_ERROR_FILE unset");
    Status s = write_record("rank " + std::to_string(id->rank) + ": No space left on device (on purpose)", false);
    if (!s.ok()) return Die(s.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return std::atoi(args["--exit_code"].c_str());
  }
  if (args.count("--peer_error_rank") && std::to_string(id->rank) == args["--peer_error_rank"]) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Status s = write_record("rank " + std::to_string(id->rank) + ": allreduce failed: peer closed the connection", true);
    if (!s.ok()) return Die(s.ToString());
    return 1;
  }
  if (args.count("--stale_probe") && store != nullptr && id->generation == 0) {
    auto last = std::chrono::steady_clock::now();
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto now = std::chrono::steady_clock::now();
      if (now - last > std::chrono::seconds(1)) {
        Status set = store->Set("stale", "x");
        auto again = StoreClient::Connect({id->store_address, id->job_id, id->generation, secret},
                                          std::chrono::steady_clock::now() + std::chrono::seconds(5));
        std::ofstream(args["--stale_probe"]) << "set: " << set.ToString() << "\nconnect: "
                                             << (again.ok() ? std::string("OK") : again.status().ToString()) << "\n";
      }
      last = now;
    }
  }
  if (args.count("--until_generation") && id->generation >= std::atoi(args["--until_generation"].c_str())) {
    if (args.count("--linger_ms")) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(args["--linger_ms"].c_str())));
    std::printf("rank %d of %d: generation %d ok\n", id->rank, id->world_size, id->generation);
    return 0;
  }
  if (args.count("--fail_rank") && std::to_string(id->rank) == args["--fail_rank"]) {
    const int code = std::atoi(args["--exit_code"].c_str()) + (args.count("--code_plus_generation") ? id->generation : 0);
    std::fprintf(stderr, "env_check: rank %d failing on purpose with exit code %d\n", id->rank, code);
    return code;
  }
  if (args.count("--kill_rank") && std::to_string(id->rank) == args["--kill_rank"]) {
    std::fprintf(stderr, "env_check: rank %d killing itself with SIGKILL\n", id->rank);
    std::fflush(stderr);
    if (args.count("--death_file")) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
      std::ofstream(args["--death_file"]) << ns << "\n";
    }
    ::raise(SIGKILL);
  }
  if (args.count("--hang") || args.count("--fail_rank") || args.count("--kill_rank") ||
      args.count("--own_error_rank") || args.count("--peer_error_rank")) {
    // Ranks that do not fail wait to be stopped by the launcher.
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return 0;
}
