// Test support for the cluster tier: the namespaced test cluster that the CTest fixture `cluster`
// brought up (tests/support/cluster_fixture.sh, scripts/netns-cluster.sh): 4 nodes of 2 slots,
// node i at 172.30.77.(10+i) behind the host-side link dslv<i>.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {

class Cluster {
 public:
  // The cluster named by DSLAUNCH_CLUSTER_DIR, or nullptr.
  static Cluster* Get() {
    static Cluster* cluster = Find();
    return cluster;
  }
  // Why Get() found none.
  static std::string Missing() {
    return "no test cluster (it needs root and 'ip netns'; run through ctest -L cluster, whose fixture brings it "
           "up and sets DSLAUNCH_CLUSTER_DIR)";
  }
  std::string dir() const { return dir_; }
  std::string hostfile() const { return dir_ + "/hostfile"; }
  std::string Addr(int node) const { return "172.30.77." + std::to_string(10 + node); }
  // The host side of node i's link: `ip link set dslv<i> down` cuts it off.
  std::string Link(int node) const { return "dslv" + std::to_string(node); }
  // The options every cluster job needs: hostfile, the cluster's key and known hosts.
  std::vector<std::string> SshOptions() const {
    return {"--hostfile", hostfile(), "--ssh_identity", dir_ + "/id_ed25519", "--ssh_known_hosts", dir_ + "/known_hosts"};
  }

 private:
  static Cluster* Find() {
    const char* dir = std::getenv("DSLAUNCH_CLUSTER_DIR");
    if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/hostfile")) return nullptr;
    auto* c = new Cluster;
    c->dir_ = dir;
    return c;
  }
  std::string dir_;
};

// Sets node `node`'s link up or down; true on success. Brought up, the neighbour entries that
// failed while it was down are dropped in every node's namespace (scripts/netns-cluster.sh names
// them dsln<i>), and it waits up to 10 s until the node reaches another node's sshd from inside
// its namespace: a job started at once must not meet a path half up ("No route to host").
inline bool SetLink(const Cluster& c, int node, bool up) {
  const auto limit = std::chrono::seconds(10);
  if (RunProcess({"/sbin/ip", "link", "set", c.Link(node), up ? "up" : "down"}, limit).exit_code != 0) return false;
  if (!up) return true;
  for (int i = 0; i < 4; ++i) RunProcess({"/sbin/ip", "-n", "dsln" + std::to_string(i), "neigh", "flush", "all"}, limit);
  const std::string other = c.Addr(node == 0 ? 1 : 0);
  return WaitFor(
      [&] {
        return RunProcess({"/sbin/ip", "netns", "exec", "dsln" + std::to_string(node), "bash", "-c",
                           "exec 3<>/dev/tcp/" + other + "/22"},
                          std::chrono::seconds(3))
                   .exit_code == 0;
      },
      limit);
}

// Brings a link back up when the test ends, however it ends.
class LinkGuard {
 public:
  LinkGuard(const Cluster& c, int node) : c_(c), node_(node) {}
  ~LinkGuard() { SetLink(c_, node_, true); }

 private:
  const Cluster& c_;
  int node_;
};

}  // namespace dslaunch::testing
