#include "agent/node/secret_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace dslaunch::agent {
namespace {

constexpr std::string_view kPrefix = "dslaunch-";
// The agent's process name as /proc/PID/comm shows it (at most 15 characters).
constexpr std::string_view kAgentComm = "dslaunch-agent";

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// True while `pid` runs a dslaunch-agent. A pid that was recycled for another program counts as
// gone: its directory is stale.
bool AgentRuns(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (!std::getline(comm, name)) return true;  // cannot tell: leave it alone
  return name == kAgentComm;
}

}  // namespace

std::string SecretDirName(std::string_view job_id, int node_rank, pid_t agent_pid) {
  return std::string(kPrefix) + std::string(job_id) + "-n" + std::to_string(node_rank) + "-" +
         std::to_string(agent_pid);
}

std::optional<pid_t> SecretDirAgentPid(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  // Parsed from the end: the job id may itself contain '-' and "-n".
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash < kPrefix.size()) return std::nullopt;
  std::string_view pid = name.substr(dash + 1);
  std::string_view rest = name.substr(0, dash);
  size_t node = rest.rfind("-n");
  if (node == std::string_view::npos || node <= kPrefix.size()) return std::nullopt;
  if (!AllDigits(pid) || pid.size() > 9 || !AllDigits(rest.substr(node + 2))) return std::nullopt;
  return static_cast<pid_t>(std::stol(std::string(pid)));
}

std::string OwnPidNamespace() {
  std::error_code ec;
  std::string ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec).string();
  return ec ? std::string() : ns;
}

int RemoveStaleSecretDirs(const std::string& runtime_dir, const std::string& own_pid_namespace) {
  DIR* dir = ::opendir(runtime_dir.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (dirent* d = ::readdir(dir)) {
    auto pid = SecretDirAgentPid(d->d_name);
    if (!pid || *pid == ::getpid()) continue;
    std::string path = runtime_dir + "/" + d->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) continue;
    std::string pid_namespace;
    std::getline(std::ifstream(path + "/" + kPidNamespaceFile), pid_namespace);
    // A directory without the file predates it (or its agent died right after mkdir): judged by pid.
    if (!pid_namespace.empty() && pid_namespace != own_pid_namespace) continue;
    if (AgentRuns(*pid)) continue;
    std::error_code ec;
    if (std::filesystem::remove_all(path, ec) > 0 && !ec) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace dslaunch::agent
