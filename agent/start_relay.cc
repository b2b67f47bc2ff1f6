#include "agent/start_relay.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "common/spawn.h"
#include "common/unique_fd.h"
#include "launcher/start/ssh/agent_starter.h"
#include "launcher/start/ssh/relay_messages.h"

namespace dslaunch::agent {
namespace {

using launcher::AgentCallbacks;
using launcher::AgentCommand;
using launcher::AgentHandle;
using launcher::RelayCommand;

// Lines to the parent: whole lines, one writer at a time (the agent of this node writes its own
// output to the same stdout, unprefixed, line by line).
class ReportWriter {
 public:
  void Write(const std::string& line) {
    std::lock_guard lock(mu_);
    for (size_t done = 0; done < line.size();) {
      ssize_t n = ::write(STDOUT_FILENO, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the parent is gone: nobody to tell
      done += static_cast<size_t>(n);
    }
  }

 private:
  std::mutex mu_;
};

// This node's own agent, a child process sharing the relay's stdout and stderr.
class OwnAgent : public AgentHandle {
 public:
  OwnAgent(pid_t pid, AgentCallbacks callbacks) : pid_(pid) {
    waiter_ = std::thread([pid, callbacks = std::move(callbacks)] {
      int st = 0;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      callbacks.on_exit(ExitStatus::FromWaitStatus(st), "agent process ended");
    });
  }
  ~OwnAgent() override { waiter_.join(); }  // destroyed only after it has ended
  void Kill() override { ::kill(pid_, SIGKILL); }

 private:
  pid_t pid_;
  std::thread waiter_;
};

Result<std::unique_ptr<AgentHandle>> StartOwnAgent(const AgentCommand& command, const std::string& secret,
                                                   AgentCallbacks callbacks) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  SpawnOptions options;
  options.argv = launcher::AgentArgv(command, command.endpoint_host);
  options.stdin_fd = read_end.get();
  options.exec_error_prefix = "dslaunch-agent (start relay): ";
  DSLAUNCH_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(options));
  read_end.Reset();
  const std::string line = secret + "\n";  // well under PIPE_BUF: one write
  (void)!::write(write_end.get(), line.data(), line.size());
  return std::unique_ptr<AgentHandle>(std::make_unique<OwnAgent>(pid, std::move(callbacks)));
}

class StartRelay {
 public:
  StartRelay(launcher::RelayPlan plan)
      : plan_(std::move(plan)), starter_(plan_.ssh, launcher::SshStarterRole::kRelay) {}

  void Check() {
    auto failures = starter_.PreflightEach(plan_.nodes, plan_.checks);
    if (!failures.ok()) {  // bad options: every node fails
      for (const auto& n : plan_.nodes) out_.Write(launcher::FormatFailReport(n.node_rank, failures.status().message()));
    } else {
      for (const auto& f : *failures) out_.Write(launcher::FormatFailReport(f.node_rank, f.reason));
    }
    out_.Write(launcher::FormatCheckedReport());
  }

  void Handle(const RelayCommand& c) {
    switch (c.kind) {
      case RelayCommand::Kind::kPlan:
        std::cerr << "dslaunch-agent --start_relay: a second plan is ignored\n";
        return;
      case RelayCommand::Kind::kSecret:
        secret_ = c.secret;
        return;
      case RelayCommand::Kind::kStart:
        return Start(c.command);
      case RelayCommand::Kind::kKill: {
        auto it = handles_.find(c.rank);
        if (it != handles_.end() && !it->second.empty()) it->second.back()->Kill();
        return;
      }
    }
  }

  // Returns once every agent started has ended.
  void WaitForAgents() {
    std::unique_lock lock(mu_);
    ended_cv_.wait(lock, [&] { return ended_ == started_; });
  }

 private:
  void Start(const AgentCommand& command) {
    const int rank = command.node_rank;
    AgentCallbacks callbacks;
    callbacks.on_output = [this, rank](std::string line) { out_.Write(launcher::FormatOutReport(rank, line)); };
    callbacks.on_exit = [this, rank](std::optional<ExitStatus> status, std::string detail) {
      out_.Write(launcher::FormatExitReport(rank, status, detail));
      std::lock_guard lock(mu_);
      ++ended_;
      ended_cv_.notify_all();
    };
    {
      std::lock_guard lock(mu_);
      ++started_;
    }
    Result<std::unique_ptr<AgentHandle>> handle = InvalidArgumentError("no such node");
    if (secret_.empty()) {
      handle = FailedPreconditionError("no secret before the start line");
    } else if (rank == plan_.self_rank) {
      // The own agent's output goes to this process's stdout and stderr directly.
      callbacks.on_output = nullptr;
      handle = StartOwnAgent(command, secret_, callbacks);
    } else if (const launcher::NodePlan* node = Find(rank)) {
      handle = starter_.Start(*node, command, secret_, callbacks);
    } else {
      handle = InvalidArgumentError("node " + std::to_string(rank) + " is not in this relay's subtree");
    }
    if (handle.ok()) {
      handles_[rank].push_back(std::move(handle).value());
    } else {
      callbacks.on_exit(std::nullopt, "the start relay could not start the agent: " + handle.status().message());
    }
  }

  const launcher::NodePlan* Find(int rank) const {
    for (const auto& n : plan_.nodes) {
      if (n.node_rank == rank) return &n;
    }
    return nullptr;
  }

  launcher::RelayPlan plan_;
  launcher::SshAgentStarter starter_;
  ReportWriter out_;
  std::string secret_;
  std::map<int, std::vector<std::unique_ptr<AgentHandle>>> handles_;  // by node rank
  std::mutex mu_;
  std::condition_variable ended_cv_;
  int started_ = 0, ended_ = 0;  // guarded by mu_
};

}  // namespace

int RunStartRelay(const StartRelayEdges& edges) {
  std::signal(SIGPIPE, SIG_IGN);  // a parent that went away must not kill the relay
  std::string line;
  if (!std::getline(std::cin, line)) return 0;  // cancelled before the plan: nothing to do
  Result<RelayCommand> first = launcher::ParseRelayCommand(line);
  if (!first.ok() || first->kind != RelayCommand::Kind::kPlan) {
    std::cerr << "dslaunch-agent --start_relay: expected a plan line first"
              << (first.ok() ? std::string() : ": " + first.status().message()) << "\n";
    return kAgentStartupFailed;
  }
  launcher::RelayPlan plan = std::move(first->plan);
  plan.ssh.home = edges.home;
  plan.ssh.agent_socket = edges.agent_socket;
  plan.ssh.local_user = edges.local_user;
  StartRelay relay(std::move(plan));
  relay.Check();
  // EOF here before any start cancels: the staged sessions close and their shells exit.
  while (std::getline(std::cin, line)) {
    Result<RelayCommand> c = launcher::ParseRelayCommand(line);
    if (!c.ok()) {
      std::cerr << "dslaunch-agent --start_relay: " << c.status().message() << "\n";
      continue;
    }
    relay.Handle(*c);
  }
  relay.WaitForAgents();
  return 0;
}

}  // namespace dslaunch::agent
