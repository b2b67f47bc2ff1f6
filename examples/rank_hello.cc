// rank-hello: the bundled example worker. Each rank reads the dslaunch environment contract,
// meets the others at a barrier on the launcher's rendezvous store, and prints where it runs.
//
//   dslaunch --nproc_per_node 4 --no_python build/bin/rank-hello
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "common/auth/secret.h"
#include "common/env_names.h"
#include "common/store/store_client.h"
#include "common/text.h"
#include "common/worker_identity.h"

extern char** environ;

namespace {

// Time for all ranks to reach the barrier: generous, the launcher starts them within milliseconds.
constexpr std::chrono::seconds kBarrierTimeout{60};

int Fail(const dslaunch::Status& s) {
  std::fprintf(stderr, "rank-hello: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  using namespace dslaunch;
  auto env = EnvironmentMap(environ);
  auto id = ParseWorkerIdentity(env);
  if (!id.ok()) return Fail(id.status());
  auto secret = ReadSecretFile(id->store_secret_file);
  if (!secret.ok()) return Fail(secret.status());

  auto start = std::chrono::steady_clock::now();
  StoreConfig config{id->store_address, id->job_id, id->generation, *secret};
  auto store = StoreClient::Connect(config, start + kBarrierTimeout);
  if (!store.ok()) return Fail(store.status());
  Status barrier = StoreBarrier(**store, "rank-hello", id->world_size, kBarrierTimeout);
  if (!barrier.ok()) return Fail(barrier);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::printf(
      "rank %d/%d local %d/%d node %d/%d on %s pid %d | MASTER_ADDR=%s MASTER_PORT=%s "
      "CUDA_VISIBLE_DEVICES=%s OMP_NUM_THREADS=%s | met %d ranks at the store barrier in %.1f ms\n",
      id->rank, id->world_size, id->local_rank, id->local_world_size, id->node_rank, id->num_nodes,
      host, static_cast<int>(::getpid()), env[env::kMasterAddr].c_str(), env[env::kMasterPort].c_str(),
      env[env::kCudaVisibleDevices].c_str(), env[env::kOmpNumThreads].c_str(), id->world_size, ms);
  return 0;
}
