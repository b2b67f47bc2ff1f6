#include "agent/node/agent_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "agent/node/node_fence.h"
#include "agent/node/secret_dir.h"
#include "common/auth/secret.h"
#include "common/process_tree.h"

namespace dslaunch::agent {

Status AgentDir::Create(const std::string& runtime_dir, std::string_view job_id, int node_rank,
                        std::string_view secret) {
  // Directories of agents killed before they could clean up (SIGKILL) go first.
  const std::string pid_namespace = OwnPidNamespace();
  RemoveStaleSecretDirs(runtime_dir, pid_namespace);
  path_ = runtime_dir + "/" + SecretDirName(job_id, node_rank, ::getpid());
  if (::mkdir(path_.c_str(), 0700) != 0) {
    std::string dir = path_;
    path_.clear();
    return ErrnoError("mkdir " + dir, errno);
  }
  if (!(std::ofstream(path_ + "/" + kPidNamespaceFile) << pid_namespace << "\n")) {
    return InternalError("cannot write " + path_ + "/" + kPidNamespaceFile);
  }
  secret_file_ = path_ + "/store.secret";
  return WriteSecretFile(secret_file_, secret);
}

Status AgentDir::RecordWorker(int generation, int rank, pid_t pid) {
  if (fence_record_.agent.pid == 0) {
    auto self = ReadProcessEntry(::getpid());
    if (!self) return InternalError("fence record: cannot read /proc/self/stat");
    fence_record_.agent = {::getpid(), self->start_time};
  }
  auto entry = ReadProcessEntry(pid);
  if (!entry) return InternalError("fence record: cannot read /proc/" + std::to_string(pid) + "/stat");
  fence_record_.workers.push_back({generation, rank, {pid, entry->start_time}});
  return WriteFenceRecord(path_, fence_record_);
}

void AgentDir::Remove() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  path_.clear();
}

}  // namespace dslaunch::agent
