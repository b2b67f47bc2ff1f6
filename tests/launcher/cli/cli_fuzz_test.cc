// Bounded randomized test of the command-line parser: mutations of valid command lines must give
// either options or an error naming what is wrong, never a crash, an exception or a hang. Case
// count and seed: tests/support/fuzz_cases.h (scripts/fuzz.sh runs it longer).
#include <doctest/doctest.h>

#include <cstdio>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "launcher/cli/cli.h"
#include "tests/support/fuzz_cases.h"

namespace dslaunch::launcher {
namespace {

using Argv = std::vector<std::string>;

const std::array<Argv, 8> kValidCommands = {
    Argv{"dslaunch", "--nproc_per_node", "4", "train.py", "--lr", "3e-4"},
    Argv{"dslaunch", "-H", "hosts", "--include", "w-0:0,1@w-1", "--grace_period", "5", "--dry-run=json", "x.py"},
    Argv{"dslaunch", "--no_ssh", "--node_rank", "1", "--master_addr", "n0", "--job_id", "J", "--rdzv_port",
         "29400", "--no_python", "./a.out"},
    Argv{"dslaunch", "--hostfile=h", "--num_nodes", "2", "--num_gpus", "2", "--heartbeat_timeout", "3",
         "--ssh_connect_timeout", "2.5", "--ssh_port", "2222", "--export", "A=1", "-m", "pkg.mod"},
    Argv{"dslaunch", "--python", "/venv/bin/python", "--log_dir", "/l", "--no_tee", "--save_pid", "t.py"},
    Argv{"dslaunch", "--master_port", "1234", "--no_local_rank", "--job_id", "run-1", "--", "prog", "-x"},
    Argv{"dslaunch", "-H", "h", "--nnodes", "2:4", "--max_restarts", "3", "--watchdog_timeout", "90",
         "--heartbeat_timeout", "3", "--heartbeat_interval", "0.5", "t.py"},
    Argv{"dslaunch", "-H", "h", "--elastic_training", "--min_elastic_nodes", "2", "--max_elastic_nodes", "4",
         "--num_nodes", "4", "t.py"},
};

// Words that mutations put in: every option, and values at and beyond the edges of their ranges.
const std::array<const char*, 52> kWords = {
    "--hostfile", "-H", "--include", "-i", "--exclude", "--num_nodes", "--num_gpus", "--nproc_per_node",
    "--master_addr", "--master_port", "--no_python", "-m", "--module", "--no_local_rank", "--python",
    "--log_dir", "--tee", "--no_tee", "--grace_period", "--save_pid", "--dry-run", "--dry-run=yaml",
    "--job_id", "--heartbeat_timeout", "--export", "--ssh_port", "--ssh_connect_timeout", "--no_ssh",
    "--node_rank", "--rdzv_port", "--nnodes", "--max_restarts", "--elastic_training", "--min_elastic_nodes",
    "--max_elastic_nodes", "--watchdog_timeout", "--heartbeat_interval", "--", "-", "", "1e10", "-1", "0", "nan",
    "99999999999999999999", "..", "=", "2:4", "4:2", ":", "0.05", "x.py"};

Argv Mutate(Argv argv, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    // Never argv[0]: the program name is not the user's input.
    const std::size_t pos = 1 + rng() % argv.size();
    switch (rng() % 4) {
      case 0:
        argv.insert(argv.begin() + static_cast<long>(pos), kWords[rng() % kWords.size()]);
        break;
      case 1:
        if (pos < argv.size()) argv.erase(argv.begin() + static_cast<long>(pos));
        break;
      case 2:
        if (pos < argv.size()) argv[pos] = kWords[rng() % kWords.size()];
        break;
      case 3:  // change a byte inside a word, or glue a value on with '='
        if (pos < argv.size() && !argv[pos].empty()) {
          std::string& w = argv[pos];
          if (rng() % 2 == 0) {
            // Any byte but NUL: a real argv entry is a C string and cannot hold one.
            w[rng() % w.size()] = static_cast<char>(1 + rng() % 255);
          } else {
            w += "=" + std::string(kWords[rng() % kWords.size()]);
          }
        }
        break;
    }
  }
  return argv;
}

TEST_CASE("ParseCommandLine gives options or an error naming the problem for mutated command lines") {
  const uint64_t seed = testing::FuzzSeed();
  const int cases = testing::FuzzCases(3000);
  std::mt19937_64 rng(seed);
  int accepted = 0;
  for (int i = 0; i < cases; ++i) {
    Argv argv = Mutate(kValidCommands[rng() % kValidCommands.size()], rng);
    std::string shown;
    for (const std::string& a : argv) {
      // Bytes that would cut or garble the report (NUL, newlines) are shown as \xNN.
      shown += "[";
      for (unsigned char ch : a) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02x", ch);
        shown += ch >= 0x20 && ch < 0x7f ? std::string(1, static_cast<char>(ch)) : std::string(hex);
      }
      shown += "] ";
    }
    CAPTURE(seed);
    CAPTURE(i);
    CAPTURE(shown);
    Result<CliCommand> parsed = ParseCommandLine(argv);
    if (!parsed.ok()) {
      REQUIRE(parsed.status().code() == StatusCode::kInvalidArgument);
      // Where: an option ("--grace_period 1e+10: ..."), PROGRAM, or the unknown word.
      const std::string m = parsed.status().message();
      CAPTURE(m);
      REQUIRE_FALSE(m.empty());
      REQUIRE((m.find('-') != std::string::npos || m.find("PROGRAM") != std::string::npos));
      continue;
    }
    ++accepted;
    if (parsed->print) continue;  // --help / --version
    const CliOptions& o = parsed->options;
    REQUIRE_FALSE(o.program.empty());
    REQUIRE(o.grace_period >= std::chrono::milliseconds(0));
    REQUIRE(o.grace_period <= kMaxGracePeriod);
    REQUIRE(o.heartbeat_timeout >= kMinHeartbeatTimeout);
    REQUIRE(o.heartbeat_timeout <= kMaxHeartbeatTimeout);
    REQUIRE(o.ssh.connect_timeout >= kMinSshConnectTimeout);
    REQUIRE(o.ssh.connect_timeout <= kMaxSshConnectTimeout);
    REQUIRE((o.master_port >= 1 && o.master_port <= 65535));
    REQUIRE((o.rdzv_port >= 0 && o.rdzv_port <= 65535));
    REQUIRE(o.heartbeat_interval >= kMinHeartbeatInterval);
    REQUIRE(o.heartbeat_interval * kMinHeartbeatsPerTimeout <= o.heartbeat_timeout);
    REQUIRE(o.max_restarts >= 0);
    if (o.watchdog_timeout) {
      REQUIRE(*o.watchdog_timeout >= kMinWatchdogTimeout);
      REQUIRE(*o.watchdog_timeout <= kMaxWatchdogTimeout);
    }
    if (o.elastic_nodes) {
      REQUIRE(o.elastic_nodes->min_nodes >= 1);
      REQUIRE(o.elastic_nodes->max_nodes.value_or(o.elastic_nodes->min_nodes) >= o.elastic_nodes->min_nodes);
      REQUIRE(o.num_nodes.value_or(o.elastic_nodes->min_nodes) >= o.elastic_nodes->min_nodes);
      REQUIRE_FALSE(o.elastic_nodes->option.empty());
    }
  }
  CHECK(accepted > 0);
  CHECK(accepted < cases);
}

}  // namespace
}  // namespace dslaunch::launcher
