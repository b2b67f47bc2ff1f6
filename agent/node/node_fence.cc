#include "agent/node/node_fence.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/node/secret_dir.h"
#include "common/unique_fd.h"
#include "common/process_tree.h"
#include "common/text.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;

bool OwnedByUs(pid_t pid) {
  struct stat st {};
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == ::getuid();
}

// What runs at `pid`, if it is the calling user's: another user's process is never one of ours.
std::optional<Sighting> Sight(pid_t pid, const std::vector<ProcessEntry>& table) {
  for (const ProcessEntry& e : table) {
    if (e.pid != pid) continue;
    if (!OwnedByUs(pid)) return std::nullopt;
    return Sighting{e.start_time, e.zombie};
  }
  return std::nullopt;
}

int OtherLiveMembers(pid_t pgid, const std::vector<ProcessEntry>& table) {
  int n = 0;
  for (const ProcessEntry& e : table) {
    if (e.group == pgid && e.pid != pgid && !e.zombie && OwnedByUs(e.pid)) ++n;
  }
  return n;
}

// The directory of agent `agent_pid` of job `job_id`, or "" when there is none we may trust.
std::string FindAgentDir(const std::string& runtime_dir, std::string_view job_id, pid_t agent_pid,
                         const std::string& own_pid_namespace) {
  const std::string prefix = "dslaunch-" + std::string(job_id) + "-n";
  DIR* dir = ::opendir(runtime_dir.c_str());
  if (dir == nullptr) return "";
  std::string found;
  while (dirent* d = ::readdir(dir)) {
    const std::string_view name = d->d_name;
    if (!name.starts_with(prefix) || SecretDirAgentPid(name) != agent_pid) continue;
    // The node rank between the job id and the pid: a job id that is a prefix of another's
    // ("a" and "a-n1") must not match.
    const std::string_view middle = name.substr(prefix.size(), name.rfind('-') - prefix.size());
    if (middle.empty() || middle.find_first_not_of("0123456789") != std::string_view::npos) continue;
    std::string path = runtime_dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) continue;
    std::string pid_namespace;
    std::getline(std::ifstream(path + "/" + kPidNamespaceFile), pid_namespace);
    if (pid_namespace != own_pid_namespace) continue;  // its pids mean other processes here
    found = std::move(path);
    break;
  }
  ::closedir(dir);
  return found;
}

std::string DescribeWorker(const RecordedWorker& w) {
  return "rank " + std::to_string(w.rank) + " of generation " + std::to_string(w.generation) + ", process group " +
         std::to_string(w.leader.pid);
}

}  // namespace

Status WriteFenceRecord(const std::string& dir, const FenceRecord& record) {
  const std::string path = dir + "/" + kFenceRecordFile;
  const std::string tmp = path + ".tmp";
  const std::string text = FormatFenceRecord(record);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return ErrnoError("fence record: open " + tmp, errno);
  for (size_t off = 0; off < text.size();) {
    ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("fence record: write " + tmp, errno);
    off += static_cast<size_t>(n);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("fence record: rename " + tmp + " to " + path, errno);
  return Status::Ok();
}

Result<FenceReport> FenceEarlierAgent(const std::string& runtime_dir, std::string_view job_id, pid_t agent_pid,
                                      const std::string& own_pid_namespace, std::chrono::milliseconds timeout) {
  FenceReport report;
  const std::string dir = FindAgentDir(runtime_dir, job_id, agent_pid, own_pid_namespace);
  if (dir.empty()) return report;
  const std::string path = dir + "/" + kFenceRecordFile;
  std::ifstream in(path);
  if (!in) return report;  // the agent died before it started a worker
  std::stringstream text;
  text << in.rdbuf();
  DSLAUNCH_ASSIGN_OR_RETURN(FenceRecord record, ParseFenceRecord(text.str(), path));
  report.found_record = true;
  if (record.agent.pid != agent_pid) {
    return InvalidArgumentError(path + ": names agent " + std::to_string(record.agent.pid) + ", expected " +
                                std::to_string(agent_pid));
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  bool first = true;
  while (true) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<ProcessEntry> table, ReadProcessTable());
    std::vector<std::string> alive;
    if (JudgeProcess(record.agent, Sight(record.agent.pid, table)) == Fate::kAlive) {
      if (first) report.agent_killed = true;
      ::kill(record.agent.pid, SIGKILL);
      alive.push_back("the agent (pid " + std::to_string(record.agent.pid) + ")");
    }
    for (const RecordedWorker& w : record.workers) {
      const pid_t pgid = w.leader.pid;
      if (JudgeGroup(w.leader, Sight(pgid, table), OtherLiveMembers(pgid, table)) != Fate::kAlive) continue;
      if (first) report.killed.push_back(w);
      // Again on every look: a member forked before the first SIGKILL reached its parent.
      ::kill(-pgid, SIGKILL);
      auto state = ProcessState(pgid);
      alive.push_back(DescribeWorker(w) + (state ? ", " + ProcessStateName(*state) : std::string()));
    }
    first = false;
    if (alive.empty()) return report;
    if (Clock::now() >= deadline) {
      return UnavailableError("fence: " + JoinText(alive, "; ") + " of agent " + std::to_string(agent_pid) +
                              " still alive " + FormatSeconds(timeout) +
                              " after SIGKILL; the node cannot take part until they are gone");
    }
    std::this_thread::sleep_for(kFencePollInterval);
  }
}

std::string DescribeFence(const FenceReport& report, pid_t agent_pid) {
  std::vector<std::string> what;
  if (report.agent_killed) what.push_back("the agent (pid " + std::to_string(agent_pid) + ")");
  if (!report.killed.empty()) {
    std::vector<std::string> workers;
    for (const RecordedWorker& w : report.killed) workers.push_back(DescribeWorker(w));
    what.push_back(std::to_string(report.killed.size()) + (report.killed.size() == 1 ? " worker (" : " workers (") +
                   JoinText(workers, "; ") + ")");
  }
  if (what.empty()) {
    return "nothing of the agent (pid " + std::to_string(agent_pid) +
           ") that held this node's place before is alive";
  }
  return "killed " + JoinText(what, " and ") + " of the agent that held this node's place before; they are gone";
}

}  // namespace dslaunch::agent
