#include "launcher/start/srun/agent_starter.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <thread>

#include "common/check.h"
#include "common/spawn.h"
#include "common/unique_fd.h"
#include "launcher/plan/shell_quote.h"
#include "launcher/start/line_cutter.h"
#include "launcher/start/ssh/connection.h"
#include "launcher/start/ssh/preflight.h"

namespace dslaunch::launcher {
namespace {

constexpr std::string_view kPreflightPrefix = "dslaunch-preflight ";
constexpr std::string_view kStepPrefix = "dslaunch-step ";
// How often a handle's thread looks at the clock while it waits for a killed srun.
constexpr int kKillPollMs = 100;

// Options every step of the launcher shares. --overlap: agents, pre-flight and re-probes are
// steps of one allocation running side by side, and Slurm (since 20.11) otherwise makes a step
// wait for CPUs another step holds. --kill-on-bad-exit=0: a failing agent never lets Slurm end
// the other steps; the launcher decides what a failure means.
void CommonOptions(std::vector<std::string>& argv, const SrunOptions& options, const char* name) {
  argv.push_back(options.srun);
  argv.push_back("--overlap");
  argv.push_back("--kill-on-bad-exit=0");
  argv.push_back("--quiet");
  argv.push_back("--mpi=none");
  argv.push_back(std::string("--job-name=") + name);
}

std::string Trim(std::string_view s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(space) - b + 1));
}

ExitStatus WaitFor(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return ExitStatus::FromWaitStatus(st);
}

// srun for the agent of one node; a thread reads its output until EOF and reports its exit.
class SrunAgentHandle : public AgentHandle {
 public:
  SrunAgentHandle(pid_t pid, UniqueFd output, std::string where, SrunOptions options, AgentCallbacks callbacks)
      : pid_(pid), where_(std::move(where)), options_(std::move(options)) {
    thread_ = std::thread([this, fd = std::move(output), callbacks = std::move(callbacks)]() mutable {
      Pump(std::move(fd), callbacks);
    });
  }
  // The runner destroys handles once their srun ended or was killed, so the join returns.
  ~SrunAgentHandle() override {
    DSLAUNCH_CHECK(std::this_thread::get_id() != thread_.get_id()) << "an agent callback destroyed its handle";
    if (thread_.joinable()) thread_.join();
  }
  void Kill() override {
    if (killed_.exchange(true)) return;
    kill_time_ = std::chrono::steady_clock::now();
    ::kill(pid_, SIGTERM);  // srun cancels its step
  }

 private:
  void Pump(UniqueFd fd, const AgentCallbacks& callbacks) {
    LineCutter lines(kMaxSrunOutput);
    auto emit = [&](std::string line) {
      if (step_.empty()) {
        if (auto step = ParseStepLine(line)) {
          step_ = *step;
          return;
        }
      }
      // srun's own note of the agent's exit code repeats what on_exit reports.
      if (line.starts_with("srun: error: ") && line.find(": task 0: Exited with exit code ") != std::string::npos) return;
      if (callbacks.on_output) callbacks.on_output(std::move(line));
    };
    bool escalated = false;
    char buf[4096];
    while (true) {
      pollfd p{fd.get(), POLLIN, 0};
      int n = ::poll(&p, 1, kKillPollMs);
      if (n < 0 && errno != EINTR) break;
      if (n > 0) {
        ssize_t got = ::read(fd.get(), buf, sizeof(buf));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        lines.Feed(std::string_view(buf, static_cast<size_t>(got)), emit);
      }
      if (killed_ && !escalated && std::chrono::steady_clock::now() - kill_time_.load() > kSrunKillWait) {
        // srun did not cancel its step: end srun, then the step, by its id.
        escalated = true;
        ::kill(pid_, SIGKILL);
        if (!step_.empty()) CancelStep();
      }
    }
    lines.Finish(emit);
    ExitStatus status = WaitFor(pid_);
    if (callbacks.on_exit) callbacks.on_exit(status, "srun of " + where_ + " ended");
  }

  void CancelStep() {
    SpawnOptions so;
    so.argv = {options_.scancel, "--quiet", step_};
    auto pid = SpawnProcess(so);
    if (pid.ok()) WaitFor(*pid);
  }

  pid_t pid_;
  std::string where_;
  SrunOptions options_;
  std::string step_;  // "JOB.STEP" once srun's task reported it (pump thread only)
  std::atomic<bool> killed_{false};
  std::atomic<std::chrono::steady_clock::time_point> kill_time_{};
  std::thread thread_;
};

}  // namespace

std::vector<std::string> SrunAgentArgv(const SrunOptions& options, const std::string& host,
                                       const std::vector<std::string>& agent_argv) {
  std::vector<std::string> argv;
  CommonOptions(argv, options, "dslaunch-agent");
  argv.insert(argv.end(), {"--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=" + host});
  if (auto it = options.cpus_per_node.find(host); it != options.cpus_per_node.end()) {
    argv.push_back("--cpus-per-task=" + std::to_string(it->second));
  }
  // The task names its step first, then becomes the agent ("$0" "$@": no quoting of the argv).
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           "printf '" + std::string(kStepPrefix) +
                               "%s.%s\\n' \"$SLURM_JOB_ID\" \"$SLURM_STEP_ID\"; exec \"$0\" \"$@\""});
  argv.insert(argv.end(), agent_argv.begin(), agent_argv.end());
  return argv;
}

std::vector<std::string> SrunPreflightArgv(const SrunOptions& options, const std::vector<std::string>& hosts,
                                           const PreflightChecks& checks) {
  std::vector<std::string> argv;
  CommonOptions(argv, options, "dslaunch-preflight");
  std::string list;
  for (const std::string& h : hosts) list += (list.empty() ? "" : ",") + h;
  const std::string k = std::to_string(hosts.size());
  argv.insert(argv.end(), {"--nodes=" + k, "--ntasks=" + k, "--ntasks-per-node=1", "--nodelist=" + list,
                           "--input=none"});
  const std::string say = "printf '" + std::string(kPreflightPrefix) + "%s %s %s\\n' \"$SLURMD_NODENAME\" ";
  std::string script;
  if (!checks.working_directory.empty()) {
    script += "cd -- " + ShellQuote(checks.working_directory) + " 2>/dev/null || { " + say + std::to_string(kPreflightNoWorkdirExit) +
              " ''; exit 0; }; ";
  }
  if (!checks.agent_path.empty()) {
    script += "v=$(" + ShellQuote(checks.agent_path) + " --version 2>&1); c=$?; ";
  } else {
    script += "v=; c=0; ";
  }
  script += say + "\"$c\" \"$(printf %s \"$v\" | tr '\\n' ' ')\"";
  argv.insert(argv.end(), {"/bin/sh", "-c", script});
  return argv;
}

std::optional<SrunPreflightLine> ParseSrunPreflightLine(std::string_view line) {
  if (!line.starts_with(kPreflightPrefix)) return std::nullopt;
  line.remove_prefix(kPreflightPrefix.size());
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp == 0) return std::nullopt;
  SrunPreflightLine out;
  out.node = std::string(line.substr(0, sp));
  line.remove_prefix(sp + 1);
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), out.code);
  if (ec != std::errc()) return std::nullopt;
  out.text = Trim(std::string_view(end, line.data() + line.size() - end));
  return out;
}

std::optional<std::string> ParseStepLine(std::string_view line) {
  if (!line.starts_with(kStepPrefix)) return std::nullopt;
  std::string step = Trim(line.substr(kStepPrefix.size()));
  if (step.empty() || step.find_first_not_of("0123456789._") != std::string::npos) return std::nullopt;
  return step;
}

std::vector<PreflightFailure> SrunPreflightFailures(const std::vector<NodePlan>& nodes, const PreflightChecks& checks,
                                                    const std::vector<SrunPreflightLine>& answers,
                                                    const std::string& srun_detail) {
  std::vector<PreflightFailure> failures;
  for (const NodePlan& node : nodes) {
    auto it = std::find_if(answers.begin(), answers.end(),
                           [&](const SrunPreflightLine& a) { return a.node == node.host; });
    std::optional<std::string> reason;
    if (it == answers.end()) {
      reason = "no answer from a task of the pre-flight step: " + srun_detail;
    } else if (it->code == 0) {
      if (!checks.agent_path.empty()) reason = VersionFailure(checks, it->text);
    } else {
      reason = EndedFailure(checks, CommandResult{ExitStatus::Exited(it->code), "", it->text});
    }
    if (reason) failures.push_back({node.node_rank, node.host, *reason});
  }
  std::sort(failures.begin(), failures.end(),
            [](const PreflightFailure& a, const PreflightFailure& b) { return a.node_rank < b.node_rank; });
  return failures;
}

Status SrunAgentStarter::Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<PreflightFailure> failures, PreflightEach(nodes, checks));
  if (failures.empty()) return Status::Ok();
  return FailedPreconditionError(FormatPreflightReport(std::move(failures), nodes.size()));
}

Result<std::vector<PreflightFailure>> SrunAgentStarter::PreflightEach(const std::vector<NodePlan>& nodes,
                                                                      const PreflightChecks& checks) {
  if (nodes.empty()) return std::vector<PreflightFailure>();
  std::vector<std::string> hosts;
  for (const NodePlan& n : nodes) {
    if (std::find(hosts.begin(), hosts.end(), n.host) == hosts.end()) hosts.push_back(n.host);
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  int err_fds[2];
  if (::pipe2(err_fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd err_read(err_fds[0]), err_write(err_fds[1]);
  SpawnOptions so;
  so.argv = SrunPreflightArgv(options_, hosts, checks);
  so.stdout_fd = write_end.get();
  so.stderr_fd = err_write.get();
  so.exec_error_prefix = "dslaunch: ";
  auto pid = SpawnProcess(so);
  if (!pid.ok()) return UnavailableError("cannot start srun for the pre-flight step: " + pid.status().message());
  write_end.Reset();
  err_write.Reset();
  std::vector<SrunPreflightLine> answers;
  std::string err;
  LineCutter out_lines(kMaxSrunOutput), err_lines(kMaxSrunOutput);
  auto on_out = [&](std::string line) {
    if (auto a = ParseSrunPreflightLine(line)) answers.push_back(std::move(*a));
  };
  auto on_err = [&](std::string line) {
    if (!Trim(line).empty() && err.size() < kMaxSrunOutput) err = Trim(line);  // the last line says most
  };
  const auto deadline = std::chrono::steady_clock::now() + kSrunPreflightTimeout;
  pollfd p[2] = {{read_end.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  bool timed_out = false;
  char buf[4096];
  while (p[0].fd >= 0 || p[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(*pid, SIGKILL);
      break;
    }
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      ssize_t got = ::read(p[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        p[i].fd = -1;
        continue;
      }
      const std::string_view bytes(buf, static_cast<size_t>(got));
      if (i == 0) {
        out_lines.Feed(bytes, on_out);
      } else {
        err_lines.Feed(bytes, on_err);
      }
    }
  }
  out_lines.Finish(on_out);
  err_lines.Finish(on_err);
  ExitStatus exit = WaitFor(*pid);
  if (timed_out) {
    return DeadlineExceededError("the pre-flight step (srun) did not end within " +
                                 std::to_string(kSrunPreflightTimeout.count()) + " s" +
                                 (err.empty() ? std::string() : ": " + err));
  }
  std::string detail = "srun " + DescribeExitStatus(exit) + (err.empty() ? std::string() : " (" + err + ")");
  return SrunPreflightFailures(nodes, checks, answers, detail);
}

Result<std::unique_ptr<AgentHandle>> SrunAgentStarter::Start(const NodePlan& node, const AgentCommand& command,
                                                             std::string_view secret, AgentCallbacks callbacks) {
  const std::string where = "node " + std::to_string(node.node_rank) + " (" + node.host + ")";
  if (secret.find('\n') != std::string_view::npos) return InvalidArgumentError("the job secret holds a newline");
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd in_read(in[0]), in_write(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd out_read(out[0]), out_write(out[1]);
  SpawnOptions so;
  so.argv = SrunAgentArgv(options_, node.host, AgentArgv(command, command.endpoint_host));
  so.stdin_fd = in_read.get();
  so.stdout_fd = out_write.get();
  so.stderr_fd = out_write.get();
  so.exec_error_prefix = "dslaunch: ";
  auto pid = SpawnProcess(so);
  if (!pid.ok()) return pid.status().WithContext(where + ": cannot start srun");
  in_read.Reset();
  out_write.Reset();
  // The secret is far below PIPE_BUF: the write completes at once; srun forwards it to the task
  // and then sees EOF. A failed write (srun died at once) shows as srun's exit, which says more.
  std::string line(secret);
  line += '\n';
  (void)!::write(in_write.get(), line.data(), line.size());
  in_write.Reset();
  return std::unique_ptr<AgentHandle>(
      std::make_unique<SrunAgentHandle>(*pid, std::move(out_read), where, options_, std::move(callbacks)));
}

}  // namespace dslaunch::launcher
