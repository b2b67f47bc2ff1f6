#include "common/worker_identity.h"

#include <charconv>

#include "common/env_names.h"

namespace dslaunch {
namespace {

Result<std::string> Need(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) {
    return InvalidArgumentError(std::string(name) + " is not set: is this program running under dslaunch?");
  }
  return it->second;
}

Result<int> NeedInt(const std::map<std::string, std::string>& env, const char* name) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, Need(env, name));
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return InvalidArgumentError(std::string(name) + "='" + text + "' is not a non-negative integer");
  }
  return v;
}

Status CheckBelow(const char* name, int value, const char* limit_name, int limit) {
  if (value < limit) return Status::Ok();
  return InvalidArgumentError(std::string(name) + "=" + std::to_string(value) + " is not below " +
                              limit_name + "=" + std::to_string(limit));
}

}  // namespace

Result<WorkerIdentity> ParseWorkerIdentity(const std::map<std::string, std::string>& e) {
  WorkerIdentity id;
  DSLAUNCH_ASSIGN_OR_RETURN(id.rank, NeedInt(e, env::kRank));
  DSLAUNCH_ASSIGN_OR_RETURN(id.world_size, NeedInt(e, env::kWorldSize));
  DSLAUNCH_ASSIGN_OR_RETURN(id.local_rank, NeedInt(e, env::kLocalRank));
  DSLAUNCH_ASSIGN_OR_RETURN(id.local_world_size, NeedInt(e, env::kLocalWorldSize));
  DSLAUNCH_ASSIGN_OR_RETURN(id.node_rank, NeedInt(e, env::kNodeRank));
  DSLAUNCH_ASSIGN_OR_RETURN(id.num_nodes, NeedInt(e, env::kNumNodes));
  DSLAUNCH_ASSIGN_OR_RETURN(id.generation, NeedInt(e, env::kRestartCount));
  DSLAUNCH_ASSIGN_OR_RETURN(id.job_id, Need(e, env::kJobId));
  DSLAUNCH_ASSIGN_OR_RETURN(id.store_address, Need(e, env::kStore));
  DSLAUNCH_ASSIGN_OR_RETURN(id.store_secret_file, Need(e, env::kStoreSecretFile));
  // Without a proxy the store is the launcher (and an older agent sets no launcher address).
  auto launcher = e.find(env::kLauncherAddress);
  id.launcher_address = launcher != e.end() && !launcher->second.empty() ? launcher->second : id.store_address;
  DSLAUNCH_RETURN_IF_ERROR(CheckBelow(env::kRank, id.rank, env::kWorldSize, id.world_size));
  DSLAUNCH_RETURN_IF_ERROR(CheckBelow(env::kLocalRank, id.local_rank, env::kLocalWorldSize, id.local_world_size));
  DSLAUNCH_RETURN_IF_ERROR(CheckBelow(env::kNodeRank, id.node_rank, env::kNumNodes, id.num_nodes));
  return id;
}

}  // namespace dslaunch
