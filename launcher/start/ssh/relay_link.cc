#include "launcher/start/ssh/relay_link.h"

#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "launcher/plan/shell_quote.h"
#include "launcher/start/line_cutter.h"
#include "launcher/start/ssh/agent_starter.h"
#include "launcher/start/ssh/preflight.h"

namespace dslaunch::launcher {

std::chrono::milliseconds RelayLevelTimeout(const SshOptions& options) {
  // Connect, key exchange, authentication, channel: each may take the connect timeout.
  constexpr int kHandshakeSteps = 4;
  return kHandshakeSteps * options.connect_timeout + std::chrono::milliseconds(kPreflightCommandTimeout);
}

struct RelayLink::Impl {
  struct Entry {
    uint64_t serial = 0;
    AgentCallbacks callbacks;
  };

  std::unique_ptr<SshConnection> connection;
  std::unique_ptr<SshChannelProcess> process;  // destroyed before `connection`
  int head_rank = 0;
  std::string where;  // "node R (HOST)"

  std::mutex mu;  // guards what follows; held while a callback runs
  std::deque<std::string> queue;  // lines for the relay's stdin, written by the link's thread
  bool secret_sent = false;
  bool ended = false;  // the relay's channel ended: no more reports
  bool stop = false;   // the link is being destroyed
  std::map<int, std::deque<Entry>> running;  // by node rank, oldest agent first
  uint64_t next_serial = 0;
  std::thread thread;

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    process->Detach();
    if (thread.joinable()) thread.join();
    process.reset();
    connection.reset();
  }

  void OnLine(std::string line, bool from_stdout) {
    std::optional<RelayReport> report = from_stdout ? ParseRelayReport(line) : std::nullopt;
    std::lock_guard lock(mu);
    if (!report) {  // the head's own agent (or the relay) wrote it
      auto it = running.find(head_rank);
      if (it != running.end() && !it->second.empty() && it->second.back().callbacks.on_output) {
        it->second.back().callbacks.on_output(std::move(line));
      }
      return;
    }
    auto it = running.find(report->rank);
    if (it == running.end() || it->second.empty()) return;
    if (report->kind == RelayReport::Kind::kOut) {
      if (it->second.back().callbacks.on_output) it->second.back().callbacks.on_output(std::move(report->text));
    } else if (report->kind == RelayReport::Kind::kExit) {
      Entry entry = std::move(it->second.front());
      it->second.pop_front();
      if (entry.callbacks.on_exit) entry.callbacks.on_exit(report->status, std::move(report->text));
    }
  }

  void Run() {
    LineCutter out(kMaxAgentOutputLine), err(kMaxAgentOutputLine);
    auto on_output = [&](OutputStream stream, std::string_view bytes) {
      const bool is_out = stream == OutputStream::kStdout;
      (is_out ? out : err).Feed(bytes, [&](std::string line) { OnLine(std::move(line), is_out); });
    };
    auto has_work = [&] {
      std::lock_guard lock(mu);
      return stop || !queue.empty();
    };
    std::string detail;
    for (;;) {
      Result<bool> waited = process->PumpUntil(on_output, has_work, std::chrono::steady_clock::time_point::max());
      if (!waited.ok()) {
        detail = waited.status().message();
        break;
      }
      if (!*waited) {
        Result<RemoteExit> exit = process->Pump(on_output);
        detail = exit.ok() ? (exit->status ? DescribeExitStatus(*exit->status) + ", " : "") + exit->detail
                           : exit.status().message();
        break;
      }
      std::deque<std::string> lines;
      {
        std::lock_guard lock(mu);
        if (stop) return;
        lines.swap(queue);
      }
      // A failed write means the channel is ending; the next pump reports how.
      for (const std::string& l : lines) {
        if (!process->WriteStdin(l, /*close=*/false).ok()) break;
      }
    }
    out.Finish([&](std::string line) { OnLine(std::move(line), true); });
    err.Finish([&](std::string line) { OnLine(std::move(line), false); });
    std::lock_guard lock(mu);
    if (stop) return;
    ended = true;
    // Each of these agents may still run (sshd leaves a command running when its session breaks);
    // its own control connection tells the launcher whether it does.
    for (auto& [rank, entries] : running) {
      for (Entry& e : entries) {
        if (e.callbacks.on_exit) {
          e.callbacks.on_exit(std::nullopt, "the start relay on " + where + " ended (" + detail +
                                                ") before it reported this agent's end");
        }
      }
      entries.clear();
    }
  }
};

namespace {

class RelayedAgentHandle : public AgentHandle {
 public:
  RelayedAgentHandle(std::shared_ptr<RelayLink> link, RelayLink::Impl* impl, int rank, uint64_t serial)
      : link_(std::move(link)), impl_(impl), rank_(rank), serial_(serial) {}

  ~RelayedAgentHandle() override {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->running.find(rank_);
    if (it == impl_->running.end()) return;
    std::erase_if(it->second, [&](const RelayLink::Impl::Entry& e) { return e.serial == serial_; });
  }

  void Kill() override {
    {
      std::lock_guard lock(impl_->mu);
      if (impl_->ended || impl_->stop) return;
      impl_->queue.push_back(FormatKillLine(rank_));
    }
    impl_->process->Wake();
  }

 private:
  std::shared_ptr<RelayLink> link_;  // keeps impl_ alive
  RelayLink::Impl* impl_;
  int rank_;
  uint64_t serial_;
};

}  // namespace

RelayLink::RelayLink(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RelayLink::~RelayLink() = default;

const std::string& RelayLink::local_address() const { return impl_->connection->local_address(); }

Result<std::shared_ptr<RelayLink>> RelayLink::Open(std::unique_ptr<SshConnection> connection,
                                                   std::unique_ptr<SshChannelProcess> process, pid_t pid,
                                                   const RelayPlan& plan, std::chrono::milliseconds idle_timeout,
                                                   std::vector<PreflightFailure>& failures) {
  failures.clear();
  auto impl = std::make_unique<Impl>();
  impl->head_rank = plan.self_rank;
  impl->where = "node " + std::to_string(plan.self_rank) + " (" + connection->host() + ")";
  impl->connection = std::move(connection);
  impl->process = std::move(process);
  impl->process->SetKillCommand(KillCommand(pid));
  SshChannelProcess& p = *impl->process;

  std::map<int, std::string> hosts;
  for (const NodePlan& n : plan.nodes) hosts[n.node_rank] = n.host;
  std::vector<PreflightFailure> found;
  bool checked = false, got_line = false;
  std::string last_other;  // the relay's last other line, for the reason when it fails
  LineCutter out(kMaxAgentOutputLine), err(kMaxAgentOutputLine);
  auto on_output = [&](OutputStream stream, std::string_view bytes) {
    (stream == OutputStream::kStdout ? out : err).Feed(bytes, [&](std::string line) {
      got_line = true;
      std::optional<RelayReport> r = stream == OutputStream::kStdout ? ParseRelayReport(line) : std::nullopt;
      if (r && r->kind == RelayReport::Kind::kChecked) {
        checked = true;
      } else if (r && r->kind == RelayReport::Kind::kFail && hosts.contains(r->rank)) {
        found.push_back({r->rank, hosts[r->rank], r->text});
      } else if (!line.empty()) {
        last_other = line;
      }
    });
  };
  const std::string exec = ShellJoin({plan.checks.agent_path, std::string(kStartRelayFlag)}) + "\n";
  DSLAUNCH_RETURN_IF_ERROR(p.WriteStdin(exec + FormatPlanLine(plan), /*close=*/false));
  const std::string silent = "the start relay reported nothing on its subtree for " +
                             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(idle_timeout).count()) +
                             " s";
  auto deadline = std::chrono::steady_clock::now() + idle_timeout;
  while (!checked) {
    Result<bool> waited = p.PumpUntil(on_output, [&] { return checked || got_line; }, deadline);
    if (waited.status().code() == StatusCode::kDeadlineExceeded) return UnavailableError(silent);
    if (!waited.ok()) return waited.status();
    if (!*waited) {
      Result<RemoteExit> exit = p.Pump(on_output);
      std::string how = exit.ok() ? (exit->status ? DescribeExitStatus(*exit->status) + ", " : "") + exit->detail
                                  : exit.status().message();
      if (!last_other.empty()) how += ": " + last_other;
      return UnavailableError("the start relay ended before it had checked its subtree (" + how + ")");
    }
    got_line = false;
    deadline = std::chrono::steady_clock::now() + idle_timeout;
  }
  failures = std::move(found);
  return std::shared_ptr<RelayLink>(new RelayLink(std::move(impl)));
}

Result<std::unique_ptr<AgentHandle>> RelayLink::Start(const std::shared_ptr<RelayLink>& self, AgentCommand command,
                                                      std::string_view secret, AgentCallbacks callbacks,
                                                      bool keep_endpoint_host) {
  Impl& s = *impl_;
  uint64_t serial = 0;
  {
    std::lock_guard lock(s.mu);
    if (s.ended) return UnavailableError("the start relay on " + s.where + " has ended");
    if (!keep_endpoint_host) command.endpoint_host = s.connection->local_address();
    if (!s.secret_sent) {
      DSLAUNCH_ASSIGN_OR_RETURN(std::string line, FormatSecretLine(secret));
      s.queue.push_back(std::move(line));
      s.secret_sent = true;
    }
    s.queue.push_back(FormatStartLine(command));
    serial = ++s.next_serial;
    s.running[command.node_rank].push_back({serial, std::move(callbacks)});
    if (!s.thread.joinable()) s.thread = std::thread([&s] { s.Run(); });
  }
  s.process->Wake();
  return std::unique_ptr<AgentHandle>(std::make_unique<RelayedAgentHandle>(self, impl_.get(), command.node_rank, serial));
}

}  // namespace dslaunch::launcher
