// AgentDir: the agent's private directory on its node (layout and name: agent/node/secret_dir.h;
// docs/security.md). Made at the agent's start, after the directories of dead agents are swept:
// 0700, holding the file that names the agent's PID namespace and the workers' secret file; the
// fence record of every worker the agent starts is kept in it (agent/node/fence_record.h, for the
// next agent of this place: docs/elastic.md, "Fencing a lost node"), and the store proxy's socket
// goes there. Removed when the agent is done: it holds the job's secret. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "agent/node/fence_record.h"
#include "common/status.h"

namespace dslaunch::agent {

class AgentDir {
 public:
  // Removes the directories of agents that no longer run (RemoveStaleSecretDirs), then makes
  // RUNTIME_DIR/SecretDirName(job_id, node_rank, own pid) with kPidNamespaceFile and the secret
  // file. Errors name the path ("mkdir /tmp/dslaunch-j-n0-7: No such file or directory"); a
  // directory made before the error stays, for Remove.
  Status Create(const std::string& runtime_dir, std::string_view job_id, int node_rank, std::string_view secret);

  // Adds a started worker to the fence record, with its start time (and the agent's own, at the
  // first), and rewrites the record. kInternal when /proc/PID/stat cannot be read.
  Status RecordWorker(int generation, int rank, pid_t pid);

  // Removes the directory and everything in it, if there is one. Idempotent.
  void Remove();

  // The directory; empty before Create and after Remove.
  const std::string& path() const { return path_; }
  // The workers' secret file (DSLAUNCH_STORE_SECRET_FILE).
  const std::string& secret_file() const { return secret_file_; }

 private:
  std::string path_;
  std::string secret_file_;
  FenceRecord fence_record_;  // what this agent started, on disk in path_
};

}  // namespace dslaunch::agent
