// The store keys and values of the control-plane simulation, shared by the simulated ranks
// (sim_node.cc) and the real ones of node 0 (sim_worker.cc). Keys are given without the
// generation prefix: StoreClient adds it, the simulated ranks add it themselves.
#pragma once

#include <string>

namespace dslaunch::sim {

// StoreBarrier's name: keys barrier/sim/arrived (ADD) and barrier/sim/done (SET, WAIT).
inline constexpr char kBarrierName[] = "sim";
// Rank 0's key that every rank reads, as an NCCL unique id goes round.
inline constexpr char kBroadcastKey[] = "sim/uid";
// What rank 0 publishes: 128 bytes, the size of an NCCL unique id.
inline std::string BroadcastValue() { return std::string(128, 'u'); }
// Each rank's published address, as Gloo's full mesh exchanges them.
inline std::string AddressKey(int rank) { return "sim/addr/" + std::to_string(rank); }
inline std::string AddressValue(int rank) {
  return "10.0." + std::to_string(rank / 250 % 250) + "." + std::to_string(rank % 250) + ":" +
         std::to_string(30000 + rank % 30000);
}

}  // namespace dslaunch::sim
