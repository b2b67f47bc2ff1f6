// sim_scale_worker: a real rank of node 0 in the control-plane simulation (benchmarks/sim_scale.cc,
// docs/benchmarks.md "Control plane at scale"). Started by the real agent with the environment
// contract, it goes through the same phases as the simulated ranks with StoreClient: a barrier
// (StoreBarrier "sim"), the broadcast (rank 0 SETs sim/uid, everyone GETs it), the all-to-all
// (SET sim/addr/<rank>, GET every other rank's) when --alltoall is given, and exits 0.
//
//   sim_scale_worker [--alltoall]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "benchmarks/sim_scale/sim_keys.h"
#include "common/auth/secret.h"
#include "common/store/store_client.h"
#include "common/worker_identity.h"

extern char** environ;

namespace {

using dslaunch::Status;

// Every phase of the simulation completes well within this, even at 100k ranks.
constexpr std::chrono::seconds kPhaseTimeout{600};

int Die(int rank, const std::string& what) {
  std::fprintf(stderr, "sim_scale_worker rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dslaunch;
  const bool alltoall = argc > 1 && std::strcmp(argv[1], "--alltoall") == 0;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  auto id = ParseWorkerIdentity(env);
  if (!id.ok()) return Die(-1, id.status().ToString());
  auto secret = ReadSecretFile(id->store_secret_file);
  if (!secret.ok()) return Die(id->rank, secret.status().ToString());
  auto deadline = std::chrono::steady_clock::now() + kPhaseTimeout;
  auto store = StoreClient::Connect({id->store_address, id->job_id, id->generation, *secret}, deadline);
  if (!store.ok()) return Die(id->rank, store.status().ToString());
  StoreClient& c = **store;
  if (Status s = StoreBarrier(c, sim::kBarrierName, id->world_size, kPhaseTimeout); !s.ok()) {
    return Die(id->rank, s.ToString());
  }
  if (id->rank == 0) {
    if (Status s = c.Set(sim::kBroadcastKey, sim::BroadcastValue()); !s.ok()) return Die(id->rank, s.ToString());
  }
  auto uid = c.Get(sim::kBroadcastKey, kPhaseTimeout);
  if (!uid.ok()) return Die(id->rank, uid.status().ToString());
  if (*uid != sim::BroadcastValue()) return Die(id->rank, "broadcast: wrong value");
  if (!alltoall) return 0;
  if (Status s = c.Set(sim::AddressKey(id->rank), sim::AddressValue(id->rank)); !s.ok()) {
    return Die(id->rank, s.ToString());
  }
  for (int peer = 0; peer < id->world_size; ++peer) {
    if (peer == id->rank) continue;
    auto value = c.Get(sim::AddressKey(peer), kPhaseTimeout);
    if (!value.ok()) return Die(id->rank, value.status().ToString());
    if (*value != sim::AddressValue(peer)) return Die(id->rank, "alltoall: wrong value for rank " + std::to_string(peer));
  }
  return 0;
}
