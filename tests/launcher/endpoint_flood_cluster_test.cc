// Cluster test: a real three-node job (rank-hello, a store barrier) while a fourth namespaced host
// floods the launcher's endpoint with idle unauthenticated connections (tests/programs/
// endpoint_flood.cc), as in issue 9 item 5. Prints the barrier time under flood; asserts that the
// job succeeds and that the flood is summarised in the launcher's log, not logged per connection.
// docs/protocol.md, "Connections before authentication".
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kRankHello = kBin + "/rank-hello";
const std::string kFlood = kBin + "/endpoint_flood";
// Hang guard for the job: rank-hello gives up on its barrier after 60 s by itself.
constexpr std::chrono::seconds kRunTimeout{150};
// The job runs on nodes 0..2; node 3 (namespace dsln3) floods.
constexpr int kJobNodes = 3;
constexpr int kSlots = 2;
constexpr char kFloodNamespace[] = "dsln3";
constexpr char kFloodAddress[] = "172.30.77.13";
// The launcher as the namespaced hosts reach it (the bridge, scripts/netns-cluster.sh).
constexpr char kLauncherAddress[] = "172.30.77.1";
// As many idle connections as issue 9 used (just under the old connection limit of 8192).
constexpr int kFloodConnections = 8190;

// The cluster the CTest fixture `cluster` brought up, or nullptr (not root: skipped).
std::string ClusterDir() {
  const char* dir = std::getenv("DSLAUNCH_CLUSTER_DIR");
  if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/hostfile")) return "";
  return dir;
}

// The TCP port `pid` listens on (its only listening socket: the endpoint), or 0.
int ListeningPort(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count(inode) > 0) {
        return std::stoi(local.substr(local.rfind(':') + 1), nullptr, 16);
      }
    }
  }
  return 0;
}

std::vector<std::string> Lines(const std::string& text, const std::string& containing) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(containing) != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST_CASE("A flood of idle connections from a fourth host does not stop a three-node rendezvous") {
  const std::string cluster = ClusterDir();
  if (cluster.empty()) {
    MESSAGE("no test cluster (it needs root and 'ip netns'; run through ctest -L cluster): skipped");
    return;
  }
  TempDir dir;
  const std::string hosts = dir.path() + "/hosts";
  {
    std::ifstream all(cluster + "/hostfile");
    std::ofstream some(hosts);
    std::string line;
    for (int i = 0; i < kJobNodes && std::getline(all, line); ++i) some << line << "\n";
  }
  // Workers wait until the flood is up, so that the barrier is measured under it.
  const std::string gate = dir.path() + "/flood-is-up";
  const std::string worker =
      "while [ ! -e '" + gate + "' ]; do sleep 0.05; done; exec '" + kRankHello + "'";
  Subprocess launcher({kLauncher, "--hostfile", hosts, "--ssh_identity", cluster + "/id_ed25519",
                       "--ssh_known_hosts", cluster + "/known_hosts", "--log_dir", dir.path() + "/logs",
                       "--grace_period", "1", "--no_python", "/bin/sh", "-c", worker});
  int port = 0;
  REQUIRE(WaitFor([&] { return (port = ListeningPort(launcher.pid())) != 0; }, std::chrono::seconds(30)));
  const std::string ready = dir.path() + "/flood-ready";
  const std::string stop = dir.path() + "/flood-stop";
  Subprocess flood({"/sbin/ip", "netns", "exec", kFloodNamespace, kFlood, "--target",
                    std::string(kLauncherAddress) + ":" + std::to_string(port), "--connections",
                    std::to_string(kFloodConnections), "--seconds", "120", "--ready_file", ready,
                    "--stop_file", stop});
  REQUIRE(WaitFor([&] { return std::filesystem::exists(ready); }, std::chrono::seconds(60)));
  std::ofstream(gate) << "go\n";
  ProcessResult job = launcher.Wait(kRunTimeout);
  std::ofstream(stop) << "stop\n";
  ProcessResult flooded = flood.Wait(std::chrono::seconds(30));
  MESSAGE(flooded.out);
  INFO(job.err);
  REQUIRE(job.exit_code == 0);

  // rank-hello: "... | met 6 ranks at the store barrier in 12.3 ms" (connect and barrier).
  std::regex met(R"(met (\d+) ranks at the store barrier in ([0-9.]+) ms)");
  double slowest = 0;
  int ranks = 0;
  for (const auto& line : Lines(job.out, "at the store barrier")) {
    std::smatch m;
    REQUIRE(std::regex_search(line, m, met));
    CHECK(m[1] == std::to_string(kJobNodes * kSlots));
    slowest = std::max(slowest, std::stod(m[2]));
    ++ranks;
  }
  CHECK(ranks == kJobNodes * kSlots);
  // The figure this test exists for (docs/protocol.md quotes it). Not asserted beyond the job's
  // success: rank-hello's own 60 s barrier timeout is the only bound, since this machine's
  // other load decides the rest.
  MESSAGE("barrier under a flood of " << kFloodConnections << " connections from " << kFloodAddress
                                      << ": slowest rank " << slowest << " ms; job " << job.seconds << " s");

  // The flood is summarised: one line at the first refusal from the address, then at most one
  // per report interval (10 s) and one when the endpoint stops, however many connections.
  auto about_flood = Lines(job.err, std::string("from ") + kFloodAddress);
  MESSAGE(about_flood.size() << " log lines about " << kFloodAddress << " in " << job.seconds << " s");
  REQUIRE(about_flood.size() >= 1);
  CHECK(about_flood[0].find("refused an unauthenticated connection from " + std::string(kFloodAddress)) !=
        std::string::npos);
  CHECK(about_flood.size() <= 2 + static_cast<size_t>(job.seconds / 10));
}

}  // namespace
}  // namespace dslaunch::testing
