// Test support for the SSH cluster tests (tests/launcher/start/ssh/*_cluster_test.cc): the
// namespaced cluster (scripts/netns-cluster.sh) of the CTest fixture, or one this test program
// brings up itself when run directly as root, and small helpers. Header-only; one cluster per
// test program.
#pragma once

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/start/ssh/agent_starter.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher::ssh_test {

using namespace std::chrono_literals;
using testing::RunProcess;
using testing::TempDir;


inline const std::string kSource = DSLAUNCH_SOURCE_DIR;
// Where this test brings up its own cluster when no fixture provides one.
inline const std::string kOwnClusterDir = "/tmp/dslaunch-ssh-test-cluster";
inline constexpr int kNodesNeeded = 3;
// A generous bound for anything that should take milliseconds on the cluster.
inline constexpr auto kEventTimeout = 10s;

inline std::string Addr(int node) { return "172.30.77." + std::to_string(10 + node); }
inline bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

// The namespaced cluster: the CTest fixture's, or one this process brings up and takes down.
class Cluster {
 public:
  // The cluster, or nullptr when this machine cannot have one (Missing() says why). A cluster
  // that root could not bring up fails the calling case.
  static Cluster* Get() {
    static std::unique_ptr<Cluster> cluster = Find();
    REQUIRE_MESSAGE(setup_error_.empty(), setup_error_);
    return cluster.get();
  }
  // Why Get() found none.
  static const std::string& Missing() { return missing_; }
  ~Cluster() {
    if (owned_) {
      RunProcess({"/bin/bash", kSource + "/scripts/netns-cluster.sh", "down"}, 60s, {"DSLAUNCH_CLUSTER_DIR=" + dir_});
    }
  }
  const std::string& dir() const { return dir_; }
  std::string known_hosts() const { return dir_ + "/known_hosts"; }
  std::string identity() const { return dir_ + "/id_ed25519"; }
  std::string HostPublicKey(int node) const {
    return ReadFile(dir_ + "/node" + std::to_string(node) + "/ssh_host_ed25519_key.pub");
  }
  SshOptions Options() const {
    SshOptions o;
    o.identities = {identity()};
    o.known_hosts = known_hosts();
    o.connect_timeout = 2s;
    return o;
  }

 private:
  static std::unique_ptr<Cluster> Find() {
    auto c = std::unique_ptr<Cluster>(new Cluster);
    const char* fixture = std::getenv("DSLAUNCH_CLUSTER_DIR");
    if (fixture != nullptr && std::filesystem::exists(std::string(fixture) + "/hostfile")) {
      c->dir_ = fixture;
      if (std::stoi(ReadFile(c->dir_ + "/nodes")) >= kNodesNeeded) return c;
      missing_ = "the test cluster in " + c->dir_ + " has fewer than " + std::to_string(kNodesNeeded) + " nodes";
      return nullptr;
    }
    if (::geteuid() != 0 || RunProcess({"/usr/sbin/ip", "netns", "list"}, 10s).exit_code != 0) {
      missing_ = "no test cluster (it needs root and 'ip netns')";
      return nullptr;
    }
    if (Contains(RunProcess({"/usr/sbin/ip", "netns", "list"}, 10s).out, "dsln0")) {
      missing_ = "another test cluster is up (namespace dsln0); set DSLAUNCH_CLUSTER_DIR to its state directory";
      return nullptr;
    }
    c->dir_ = kOwnClusterDir;
    auto up = RunProcess({"/bin/bash", kSource + "/scripts/netns-cluster.sh", "up", std::to_string(kNodesNeeded)},
                         60s, {"DSLAUNCH_CLUSTER_DIR=" + c->dir_});
    c->owned_ = true;
    if (up.exit_code != 0) {
      setup_error_ = "netns-cluster.sh up failed: " + up.err;
      return nullptr;
    }
    return c;
  }
  static inline std::string missing_;
  static inline std::string setup_error_;
  std::string dir_;
  bool owned_ = false;
};

inline NodePlan Node(int rank, std::string host) {
  NodePlan n;
  n.node_rank = rank;
  n.host = std::move(host);
  return n;
}

// Collects what an agent's transport reports, from any thread.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  std::optional<std::optional<ExitStatus>> exit;
  std::string detail;
  int exits = 0;

  AgentCallbacks Callbacks() {
    return {[this](std::string line) {
              std::lock_guard lock(mu);
              lines.push_back(std::move(line));
              cv.notify_all();
            },
            [this](std::optional<ExitStatus> status, std::string d) {
              std::lock_guard lock(mu);
              exit = status;
              detail = std::move(d);
              ++exits;
              cv.notify_all();
            }};
  }
  bool WaitExit(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return exit.has_value(); });
  }
  bool WaitLine(const std::string& line, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return std::find(lines.begin(), lines.end(), line) != lines.end(); });
  }
};

inline double Ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace dslaunch::launcher::ssh_test
