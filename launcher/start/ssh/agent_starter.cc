#include "launcher/start/ssh/agent_starter.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <utility>

#include "launcher/start/line_cutter.h"
#include "launcher/start/ssh/bounded_fan_out.h"
#include "launcher/start/ssh/preflight.h"
#include "launcher/start/ssh/relay_link.h"
#include "launcher/start/ssh/start_tree.h"

namespace dslaunch::launcher {
namespace {

// A remote agent: owns its session and channel; one thread pumps the channel and reports.
class SshAgentHandle : public AgentHandle {
 public:
  SshAgentHandle(std::unique_ptr<SshConnection> connection, std::unique_ptr<SshChannelProcess> process,
                 bool pid_known, AgentCallbacks callbacks)
      : connection_(std::move(connection)),
        process_(std::move(process)),
        callbacks_(std::move(callbacks)),
        pid_known_(pid_known) {
    thread_ = std::thread([this] { Pump(); });
  }

  ~SshAgentHandle() override {
    DSLAUNCH_CHECK(std::this_thread::get_id() != thread_.get_id()) << "an agent callback destroyed its handle";
    destroying_ = true;
    process_->Detach();  // the pump returns at once and reports nothing more
    thread_.join();
    process_.reset();  // the channel before its session
    connection_.reset();
  }

  void Kill() override { process_->Kill(); }

 private:
  void Pump() {
    LineCutter lines[2] = {LineCutter(kMaxAgentOutputLine), LineCutter(kMaxAgentOutputLine)};
    auto emit = [this](std::string line) {
      if (!pid_known_) {
        // Started without pre-flight: the staged shell's ready line gives the pid to kill.
        if (std::optional<ReadyLine> ready = ParseReadyLine(line)) {
          process_->SetKillCommand(KillCommand(ready->pid));
          pid_known_ = true;
          return;
        }
      }
      if (callbacks_.on_output) callbacks_.on_output(std::move(line));
    };
    Result<RemoteExit> exit = process_->Pump([&](OutputStream stream, std::string_view bytes) {
      lines[stream == OutputStream::kStdout ? 0 : 1].Feed(bytes, emit);
    });
    lines[0].Finish(emit);
    lines[1].Finish(emit);
    if (destroying_) return;  // the handle is being destroyed: report nothing
    // Pump without a deadline fails only on an internal error; report it as the end of the agent.
    RemoteExit end = exit.ok() ? std::move(exit).value() : RemoteExit{std::nullopt, exit.status().message()};
    if (callbacks_.on_exit) callbacks_.on_exit(end.status, std::move(end.detail));
  }

  std::unique_ptr<SshConnection> connection_;
  std::unique_ptr<SshChannelProcess> process_;
  AgentCallbacks callbacks_;
  bool pid_known_;  // pump thread only, after construction
  std::atomic<bool> destroying_{false};
  std::thread thread_;
};

// "ssh to HOST:PORT: reason" -> "reason": the report line names the node and host already; a port
// other than SSH's usual one stays, as "port PORT: reason", since the line would not show it.
std::string WithoutHostPrefix(const std::string& message, const std::string& host, int port) {
  std::string prefix = "ssh to " + host + ":" + std::to_string(port) + ": ";
  if (!message.starts_with(prefix)) return message;
  const std::string reason = message.substr(prefix.size());
  return port == kSshDefaultPort ? reason : "port " + std::to_string(port) + ": " + reason;
}

// Stderr kept from a staged command for the failure reason; the rest is dropped.
constexpr size_t kMaxPreflightStderr = 4096;

}  // namespace

SshAgentStarter::SshAgentStarter(SshOptions options, SshStarterRole role)
    : options_(std::move(options)), role_(role) {}
SshAgentStarter::~SshAgentStarter() = default;

Status SshAgentStarter::Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<NodeFailure> failures, PreflightEach(nodes, checks));
  if (failures.empty()) return Status::Ok();
  // Every waiting shell reads EOF and exits, and every relay with its subtree: nothing stays staged.
  staged_.clear();
  relay_of_.clear();
  return FailedPreconditionError(FormatPreflightReport(std::move(failures), nodes.size()));
}

std::optional<std::string> SshAgentStarter::CheckNode(const NodePlan& node, const std::string& command,
                                                      const PreflightChecks& checks, Staged& staged) const {
  auto connection = SshConnection::Connect(SshLoginUser(options_, node.user), node.host, options_);
  if (!connection.ok()) return WithoutHostPrefix(connection.status().message(), node.host, options_.port);
  auto process = (*connection)->Start(command, "", /*close_stdin=*/false);
  if (!process.ok()) return WithoutHostPrefix(process.status().message(), node.host, options_.port);
  CommandResult ended;
  std::optional<ReadyLine> ready;
  LineCutter out_lines(kMaxAgentOutputLine);
  auto on_output = [&](OutputStream stream, std::string_view bytes) {
    if (stream == OutputStream::kStderr) {
      ended.err.append(bytes.substr(0, kMaxPreflightStderr - std::min(kMaxPreflightStderr, ended.err.size())));
      return;
    }
    out_lines.Feed(bytes, [&](std::string line) {
      if (!ready) ready = ParseReadyLine(line);
    });
  };
  auto is_ready = [&] { return ready.has_value(); };
  auto deadline = std::chrono::steady_clock::now() + kPreflightCommandTimeout;
  auto waited = (*process)->PumpUntil(on_output, is_ready, deadline);
  if (waited.status().code() == StatusCode::kDeadlineExceeded) {
    return "no answer within " + std::to_string(kPreflightCommandTimeout.count()) +
           " s from the pre-flight command (login shell, cd, agent --version)";
  }
  if (!waited.ok()) return WithoutHostPrefix(waited.status().message(), node.host, options_.port);
  if (!*waited) {
    auto exit = (*process)->Pump(on_output);
    if (!exit.ok()) return WithoutHostPrefix(exit.status().message(), node.host, options_.port);
    if (!exit->status) return exit->detail + " during pre-flight";
    ended.exit = *exit->status;
    return EndedFailure(checks, ended);
  }
  if (!checks.agent_path.empty()) {
    if (auto failure = VersionFailure(checks, ready->version)) return failure;
  }
  staged = Staged{std::move(connection).value(), std::move(process).value(), ready->pid};
  return std::nullopt;
}

std::pair<size_t, std::shared_ptr<RelayLink>> SshAgentStarter::CheckGroup(
    const std::vector<NodePlan>& nodes, StartGroup group, const std::string& command, const PreflightChecks& checks,
    std::vector<Staged>& staged, std::vector<std::optional<std::string>>& reasons,
    std::vector<PreflightFailure>& subtree_failures) const {
  // A head that fails is reported, and the next node of the group becomes the head of the rest.
  for (size_t head = group.begin; head < group.end; ++head) {
    reasons[head] = CheckNode(nodes[head], command, checks, staged[head]);
    if (reasons[head] || head + 1 == group.end) continue;
    RelayPlan plan{options_, checks, nodes[head].node_rank,
                   std::vector<NodePlan>(nodes.begin() + head + 1, nodes.begin() + group.end)};
    const auto idle = RelayLevelTimeout(options_) * (TreeDepth(plan.nodes.size(), options_.fanout) + 1);
    auto link = RelayLink::Open(std::move(staged[head].connection), std::move(staged[head].process),
                                staged[head].pid, plan, idle, subtree_failures);
    if (link.ok()) return {head, std::move(link).value()};
    reasons[head] = WithoutHostPrefix(link.status().message(), nodes[head].host, options_.port);
  }
  return {group.end, nullptr};
}

Result<std::vector<PreflightFailure>> SshAgentStarter::PreflightEach(const std::vector<NodePlan>& nodes,
                                                                     const PreflightChecks& checks) {
  DSLAUNCH_RETURN_IF_ERROR(ValidateSshOptions(options_));
  staged_.clear();
  relay_of_.clear();
  const std::string command = StagedAgentCommand(checks);
  std::vector<Staged> staged(nodes.size());
  std::vector<std::optional<std::string>> reasons(nodes.size());
  // The groups this starter starts (start_tree.h): a group of one is a node it starts itself, a
  // larger one a head that relays the rest. At most options_.fanout handshakes and pre-flight
  // commands run at once; when ForEachBounded returns, the sessions belong to this thread again.
  const std::vector<StartGroup> groups = role_ == SshStarterRole::kRelay
                                             ? SplitIntoGroups(0, nodes.size(), options_.fanout)
                                             : LauncherGroups(nodes.size(), options_.fanout, options_.tree_threshold);
  std::vector<std::vector<NodeFailure>> subtree_failures(groups.size());
  std::vector<std::pair<size_t, std::shared_ptr<RelayLink>>> links(groups.size());  // head index, link
  ForEachBounded(groups.size(), options_.fanout, [&](size_t g) {
    links[g] = CheckGroup(nodes, groups[g], command, checks, staged, reasons, subtree_failures[g]);
  });
  std::vector<NodeFailure> failures;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [head, link] = links[g];
    for (size_t i = groups[g].begin; i < groups[g].end; ++i) {
      if (reasons[i]) {
        failures.push_back({nodes[i].node_rank, nodes[i].host, *reasons[i]});
      } else if (link == nullptr || i < head) {
        staged_[nodes[i].node_rank] = std::move(staged[i]);
      }
    }
    if (link == nullptr) continue;
    failures.insert(failures.end(), subtree_failures[g].begin(), subtree_failures[g].end());
    std::set<int> failed;
    for (const NodeFailure& f : subtree_failures[g]) failed.insert(f.node_rank);
    for (size_t i = head; i < groups[g].end; ++i) {
      if (!failed.contains(nodes[i].node_rank)) relay_of_[nodes[i].node_rank] = link;
    }
  }
  std::sort(failures.begin(), failures.end(),
            [](const NodeFailure& a, const NodeFailure& b) { return a.node_rank < b.node_rank; });
  return failures;
}

Result<SshAgentStarter::Staged> SshAgentStarter::TakeStaged(const NodePlan& node) {
  auto it = staged_.find(node.node_rank);
  if (it != staged_.end()) {
    Staged staged = std::move(it->second);
    staged_.erase(it);
    if (staged.connection->host() == node.host) return staged;
  }
  Staged fresh;
  DSLAUNCH_ASSIGN_OR_RETURN(fresh.connection,
                            SshConnection::Connect(SshLoginUser(options_, node.user), node.host, options_));
  DSLAUNCH_ASSIGN_OR_RETURN(fresh.process, fresh.connection->Start(StagedAgentCommand({}), "", /*close_stdin=*/false));
  return fresh;
}

Result<std::unique_ptr<AgentHandle>> SshAgentStarter::Start(const NodePlan& node, const AgentCommand& command,
                                                            std::string_view secret, AgentCallbacks callbacks) {
  const std::string where = "node " + std::to_string(node.node_rank) + " (" + node.host + ")";
  const bool relay = role_ == SshStarterRole::kRelay;
  if (auto it = relay_of_.find(node.node_rank); it != relay_of_.end()) {
    AgentCommand for_node = command;
    for_node.node_rank = node.node_rank;
    auto handle = it->second->Start(it->second, for_node, secret, callbacks, /*keep_endpoint_host=*/relay);
    if (handle.ok()) return handle;
    // The relay has ended: start the node directly (a new session, as for a node without pre-flight).
    relay_of_.erase(it);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(Staged staged, TakeStaged(node));
  // A relay passes on the launcher's address as its parent gave it; the launcher uses its own
  // address on the node's connection.
  const std::string& endpoint = relay ? command.endpoint_host : staged.connection->local_address();
  Result<std::string> input = StagedAgentInput(AgentArgv(command, endpoint), secret);
  if (!input.ok()) return input.status().WithContext(where);
  DSLAUNCH_RETURN_IF_ERROR(staged.process->WriteStdin(*input, /*close=*/true).WithContext(where));
  if (staged.pid > 0) staged.process->SetKillCommand(KillCommand(staged.pid));
  return std::unique_ptr<AgentHandle>(std::make_unique<SshAgentHandle>(
      std::move(staged.connection), std::move(staged.process), staged.pid > 0, std::move(callbacks)));
}

}  // namespace dslaunch::launcher
