#include "agent/workers/worker_env_on_node.h"

#include <algorithm>

#include "common/check.h"
#include "common/env_names.h"

namespace dslaunch::agent {

int DefaultOmpThreads(int cores, int local_workers) {
  DSLAUNCH_CHECK(local_workers >= 1) << "DefaultOmpThreads needs at least one worker, got "
                                     << local_workers;
  return std::max(1, cores / local_workers);
}

std::vector<std::string> CompleteWorkerEnvironment(const std::map<std::string, std::string>& base,
                                                   const std::map<std::string, std::string>& node_planned,
                                                   const std::map<std::string, std::string>& worker_planned,
                                                   const NodeFacts& node) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, v] : node_planned) env[k] = v;
  for (const auto& [k, v] : worker_planned) env[k] = v;
  // The secret itself never reaches a worker, whoever exported it: workers read it from the
  // 0600 file named by DSLAUNCH_STORE_SECRET_FILE (docs/security.md).
  env.erase(env::kJobSecret);
  if (!env.count(env::kOmpNumThreads)) {
    // A bound worker gets one thread per core of its set, as DeepSpeed's --bind_cores_to_rank.
    const int threads = node.bound_cores > 0 ? node.bound_cores
                                             : DefaultOmpThreads(node.cores, std::max(1, node.local_workers));
    env[env::kOmpNumThreads] = std::to_string(threads);
  }
  if (!node.store_address.empty()) env[env::kStore] = node.store_address;
  if (!node.launcher_address.empty()) env[env::kLauncherAddress] = node.launcher_address;
  env[env::kStoreSecretFile] = node.secret_file;
  if (!node.job_dir.empty()) env[env::kJobDir] = node.job_dir;
  // NCCL's bootstrap, Gloo and TensorPipe pick an interface by their own rules (NCCL may take a
  // docker bridge or a slow management network; Gloo takes the address the hostname resolves to,
  // loopback under Debian's default /etc/hosts); the route to the master is the one the job's
  // rendezvous works over. Each variable the user set stays as it is.
  if (!node.master_interface.empty()) {
    for (const char* name : {env::kNcclSocketIfname, env::kGlooSocketIfname, env::kTensorPipeSocketIfname}) {
      env.try_emplace(name, node.master_interface);
    }
  }
  // One setting under two names: a user who set either has chosen, and the other stays unset.
  if (!env.count(env::kTorchNcclAsyncErrorHandling) && !env.count(env::kNcclAsyncErrorHandling)) {
    env[env::kTorchNcclAsyncErrorHandling] = "1";
    env[env::kNcclAsyncErrorHandling] = "1";
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace dslaunch::agent
