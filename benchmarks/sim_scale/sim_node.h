// A simulated node: its agent (the control protocol of docs/protocol.md, "Agent control
// messages": REGISTER as a node-mode join with 8 slots, ASSIGNMENT, WORKER_STARTED, HEARTBEAT
// replies, WORKER_EXITED, AGENT_DONE, RELEASE) and its ranks' store traffic through the phases of
// the benchmark (docs/benchmarks.md, "Control plane at scale"):
//
//   connect    every rank opens an authenticated store connection (direct); proxied, nothing to
//              open: the node's store traffic rides its agent's control connection
//   barrier    StoreBarrier's keys: ADD barrier/sim/arrived (1 per rank, or the node's ranks in
//              one ADD), the last arrival SETs barrier/sim/done, every rank (node) WAITs for it
//   broadcast  every rank (node) GETs rank 0's key sim/uid, as NCCL's unique id goes round
//   alltoall   every rank SETs sim/addr/<rank> and GETs every other rank's, as Gloo's full mesh
//              does (proxied: the node GETs each key once and fans it out to its ranks)
//   teardown   store connections close, the agent reports its workers' exits and AGENT_DONE,
//              and waits for RELEASE
//
// Direct is today's path (one store-client connection per rank); proxied is what an agent's store
// proxy sends upstream for its node (docs/protocol.md, "Store proxy"): PROXIED frames on the agent's
// control connection, whose requests are what the proxy's RequestCombiner makes of its 8 ranks'
// (one ADD of 8, one WAIT, one GET per key; SETs one to one). Single-threaded, on the SimLoop.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/sim_scale/sim_keys.h"
#include "benchmarks/sim_scale/sim_net.h"

namespace dslaunch::sim {

enum class Phase { kJoin, kConnect, kBarrier, kBroadcast, kAllToAll, kTeardown, kCount };
inline constexpr int kPhaseCount = static_cast<int>(Phase::kCount);
const char* PhaseName(Phase p);

// GETs a rank keeps in flight during the all-to-all: one, as Gloo's full mesh and NCCL's bootstrap
// read their peers' keys one after another. A proxied node keeps one per rank (the proxy carries
// its 8 ranks' GETs at once; they name different keys, so nothing combines).
inline constexpr int kAllToAllWindow = 1;
// How long a simulated GET or WAIT may park at the store.
inline constexpr std::chrono::seconds kStoreWait{600};

// What every node shares: the job, the counters the orchestrator watches, the connect window.
struct SimJob {
  SimLoop* loop = nullptr;
  sockaddr_in server{};
  std::string job_id;
  std::string secret;
  std::string version;  // the launcher's release (REGISTER.version)
  bool proxied = false;
  int world_size = 0;
  int ranks_per_node = 8;
  // Ranks (not connections) that finished each phase; agents for kJoin, nodes for kTeardown.
  std::array<int64_t, kPhaseCount> done{};
  int64_t connect_retries = 0;
  std::vector<std::string> errors;  // what went wrong, each "node N: ..."
  // Connections in their handshake at most at once (the simulator paces itself like the ranks
  // of real nodes that start a few at a time, instead of meeting the endpoint's bounds).
  int connect_window = 512;
  int connecting = 0;
  std::deque<std::function<void()>> connect_queue;
  void Connect(std::function<void()> start);  // starts now, or when the window has room
  void Connected();                           // a connection finished its handshake (or failed)
};

class SimNode {
 public:
  // `index` >= 1 (node 0 is the real one); its connections come from 127.1.<index/250>.<index%250+1>.
  SimNode(SimJob& job, int index);
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  void StartJoin();
  void StartConnect();
  void StartBarrier();
  void StartBroadcast();
  void StartAllToAll();
  void StartTeardown();

 private:
  struct Rank {
    int rank = 0;
    std::unique_ptr<SimConnection> conn;  // direct mode
    int next_get = 0;                     // all-to-all: the next key to GET
    int gets_done = 0;
  };
  ConnectTarget Target(PeerRole role) const;
  void OnControl(wire::Frame f);
  void Error(const std::string& what);
  SimConnection& StoreOf(Rank& r) { return job_.proxied ? *agent_ : *r.conn; }
  std::string Key(const std::string& key) const;
  void Barrier(Rank* r);       // direct: one rank; proxied: r == nullptr, the node
  void AllToAllGets(Rank* r);  // keeps kAllToAllWindow GETs in flight
  int Weight() const { return job_.proxied ? static_cast<int>(ranks_.size()) : 1; }

  SimJob& job_;
  int index_;
  in_addr source_{};
  std::unique_ptr<SimConnection> agent_;
  std::vector<Rank> ranks_;
  int generation_ = 0;
  uint64_t heartbeat_sequence_ = 0;
  Rank node_;  // proxied all-to-all: the node's own GET cursor
};

}  // namespace dslaunch::sim
