// How many connections the launcher's endpoint must hold for a job, and whether the launcher's
// descriptor limit allows them (docs/launcher.md, "Descriptor limit"; docs/protocol.md,
// "Connection limits"). Pure: the plan's numbers and the limit are arguments.
//
// A job's endpoint holds, at most at once: one control connection per agent, the workers' store
// traffic (one connection per rank on the direct path; none of its own when the agents proxy it,
// since the proxy's frames ride the agent's control connection, docs/protocol.md "Store proxy"),
// and a margin; then, as far as the descriptor limit allows, the connections a flood may hold in
// their handshake (HandshakeLimits::total). Every connection is a descriptor, and the launcher
// needs some descriptors of its own besides.
// A job that cannot fit is refused before anything starts, with the numbers and what to do,
// instead of having connections refused in the middle of its rendezvous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace dslaunch::launcher {

// Connections beyond the plan's: a restarted generation's workers may connect while the previous
// generation's connections are still closing, and tools (a probe, `dslaunch status` through the
// endpoint) come and go. 1/16 of the plan, at least kMinConnectionMargin.
inline constexpr int64_t kConnectionMarginDivisor = 16;
inline constexpr int64_t kMinConnectionMargin = 64;
// Descriptors the launcher uses besides its endpoint's connections: stdio, the listening socket,
// the event log, the status page and its clients, libraries' own files.
inline constexpr int64_t kReservedDescriptors = 256;

struct ConnectionDemand {
  int64_t ranks = 0;   // workers of the largest generation (every candidate node's slots)
  int64_t nodes = 0;   // agents, one per node (every candidate node)
  // The agents proxy their workers' store traffic on their control connections: no connection per
  // rank. Descriptors left over then admit workers that fall back to the direct path (a node
  // whose proxy socket cannot be made), before the handshake headroom. False: the direct path,
  // every worker connects to the launcher itself.
  bool store_proxy = false;
  // Descriptors held by how the agents were started, for the job's length (an SSH session per
  // node, or per start-tree head; a local agent's pipes); 0 when someone else started them (node
  // mode, srun).
  int64_t start_descriptors = 0;
  // Connections a flood may hold in their handshake (HandshakeLimits::total).
  int64_t handshake_headroom = 0;
};

struct ConnectionBudget {
  int64_t planned = 0;      // agents + the workers' store connections (direct path only)
  int64_t margin = 0;
  int64_t descriptors = 0;  // what the job needs: planned + margin + start + reserved
  // The endpoint's limit: planned + margin + as much of handshake_headroom (with the proxy, the
  // ranks' fallback connections first) as the descriptor limit leaves (a flood may hold that many
  // places; the job's own connections always fit).
  int64_t max_connections = 0;
};

// The budget of `demand` under `descriptor_limit` (the launcher's soft RLIMIT_NOFILE after
// raising it to the hard limit), or kFailedPrecondition when the job's own connections do not
// fit: the message gives the numbers and the ways out (`ulimit -n`, LimitNOFILE=, and on the direct
// path the agents' store proxy, which needs a connection per node instead of one per rank). Precondition:
// counts >= 0.
Result<ConnectionBudget> FitConnections(const ConnectionDemand& demand, uint64_t descriptor_limit);

}  // namespace dslaunch::launcher
