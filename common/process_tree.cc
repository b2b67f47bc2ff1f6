#include "common/process_tree.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace dslaunch {
namespace {

// Pause between sweeps of KillAllDescendants: long enough for SIGKILLed processes to die and be
// re-parented, short enough that a clean sweep costs nothing noticeable at the end of a job.
constexpr std::chrono::milliseconds kSweepPause{5};

// Parses /proc/PID/stat: "pid (comm) state ppid ...". comm may contain spaces and parentheses,
// so the fields after it are found from the last ')'.
bool ReadStat(pid_t pid, ProcessEntry& out) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr) return false;
  char state = 0;
  int ppid = 0, pgrp = 0;
  unsigned long long start_time = 0;
  // Fields 3, 4 and 5 (state, ppid, pgrp), then 15 skipped, then 22 (starttime), proc(5).
  if (std::sscanf(close + 1, " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &state, &ppid, &pgrp, &start_time) != 4) {
    return false;
  }
  out.pid = pid;
  out.start_time = start_time;
  out.state = state;
  out.parent = ppid;
  out.group = pgrp;
  out.zombie = state == 'Z' || state == 'X';
  return true;
}

// Reaps every child that has exited. Returns false when the caller has no child left at all:
// then it has no descendant either (every descendant's chain of parents runs through a child).
bool ReapChildren() {
  while (true) {
    pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) continue;
    return !(pid < 0 && errno == ECHILD);
  }
}

}  // namespace

std::vector<pid_t> DescendantsOf(pid_t root, const std::vector<ProcessEntry>& table) {
  std::unordered_multimap<pid_t, const ProcessEntry*> children;
  children.reserve(table.size());
  for (const auto& e : table) {
    if (e.pid != e.parent) children.emplace(e.parent, &e);
  }
  // Breadth-first over all processes, zombies included (a zombie's children were re-parented
  // already, so nothing hangs below it); only live ones are returned.
  // The table is read one process at a time while pids are recycled, so it is not guaranteed to
  // be a tree: each pid is visited once.
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{root};
  std::unordered_set<pid_t> seen{root};
  for (size_t i = 0; i < frontier.size(); ++i) {
    auto [begin, end] = children.equal_range(frontier[i]);
    for (auto it = begin; it != end; ++it) {
      if (!seen.insert(it->second->pid).second) continue;
      frontier.push_back(it->second->pid);
      if (!it->second->zombie) out.push_back(it->second->pid);
    }
  }
  return out;
}

std::optional<char> ProcessState(pid_t pid) {
  ProcessEntry e;
  if (!ReadStat(pid, e)) return std::nullopt;
  return e.state;
}

std::optional<ProcessEntry> ReadProcessEntry(pid_t pid) {
  ProcessEntry e;
  if (!ReadStat(pid, e)) return std::nullopt;
  return e;
}

std::string ProcessStateName(char state) {
  switch (state) {
    case 'T':
    case 't': return "stopped";
    case 'D': return "disk sleep";
    case 'R': return "running";
    case 'S':
    case 'I': return "sleeping";
    case 'Z': return "zombie";
  }
  return std::string(1, state);
}

Result<std::vector<ProcessEntry>> ReadProcessTable() {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return ErrnoError("opendir /proc", errno);
  std::vector<ProcessEntry> table;
  while (dirent* d = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0' || pid <= 0) continue;
    ProcessEntry e;
    if (ReadStat(static_cast<pid_t>(pid), e)) table.push_back(e);
  }
  ::closedir(dir);
  return table;
}

Status BecomeChildSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return ErrnoError("prctl(PR_SET_CHILD_SUBREAPER)", errno);
  return Status::Ok();
}

Result<size_t> SignalDescendants(int signal, const std::vector<pid_t>& except_groups) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<ProcessEntry> table, ReadProcessTable());
  std::unordered_map<pid_t, pid_t> group_of;
  for (const auto& e : table) group_of[e.pid] = e.group;
  const std::unordered_set<pid_t> skip(except_groups.begin(), except_groups.end());
  size_t signalled = 0;
  for (pid_t pid : DescendantsOf(::getpid(), table)) {
    if (skip.count(group_of[pid]) != 0) continue;
    if (::kill(pid, signal) == 0) ++signalled;
  }
  return signalled;
}

Result<size_t> KillAllDescendants(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unordered_set<pid_t> killed;
  while (true) {
    // The usual end of a job: nothing left, and no need to read the process table.
    if (!ReapChildren()) return killed.size();
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<ProcessEntry> table, ReadProcessTable());
    std::vector<pid_t> alive = DescendantsOf(::getpid(), table);
    if (alive.empty()) return killed.size();
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string pids;
      for (pid_t p : alive) pids += (pids.empty() ? "" : ", ") + std::to_string(p);
      return DeadlineExceededError("descendants still alive after SIGKILL: " + pids);
    }
    for (pid_t pid : alive) {
      if (::kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    std::this_thread::sleep_for(kSweepPause);
  }
}

}  // namespace dslaunch
