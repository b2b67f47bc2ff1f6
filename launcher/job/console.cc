#include "launcher/job/console.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/text.h"
#include "launcher/job/failure_hint.h"

namespace dslaunch::launcher {

std::string FormatOutputLines(int rank, const std::string& host, const std::vector<std::string>& lines) {
  std::string prefix = "[rank " + std::to_string(rank);
  if (!host.empty()) prefix += " " + host;
  prefix += "] ";
  std::string out;
  for (const auto& l : lines) {
    out += prefix;
    out += l;
    out += '\n';
  }
  return out;
}

std::string FormatSummary(const std::string& job_id, const JobTracker& tracker) {
  const auto& cause = tracker.root_cause();
  if (!cause) return "";
  std::string s = "dslaunch: job " + job_id + " failed: ";
  switch (cause->kind) {
    case RootCause::Kind::kWorkerFailed:
      s += "rank " + std::to_string(cause->rank) + " on host " + cause->host + " (pid " +
           std::to_string(cause->pid) + ") exited with " + DescribeExitStatus(cause->status) + "\n";
      break;
    case RootCause::Kind::kWorkerStalled:
      s += "rank " + std::to_string(cause->rank) + " on host " + cause->host + " reported no progress for " +
           FormatSeconds(std::chrono::milliseconds(cause->silence_ms)) + " (watchdog timeout " +
           FormatSeconds(std::chrono::milliseconds(cause->timeout_ms)) + "; last step " +
           (cause->last_step >= 0 ? std::to_string(cause->last_step) : std::string("none reported")) +
           (cause->process_state.empty() ? "" : "; found " + cause->process_state) + ")\n";
      if (tracker.stalled_ranks().size() > 1) {
        s += "dslaunch: ranks that stopped reporting, longest silent first:";
        std::vector<RootCause> by_silence = tracker.stalled_ranks();
        std::stable_sort(by_silence.begin(), by_silence.end(),
                         [](const RootCause& a, const RootCause& b) { return a.silence_ms > b.silence_ms; });
        for (const RootCause& r : by_silence) {
          s += " " + std::to_string(r.rank) + " (step " + (r.last_step >= 0 ? std::to_string(r.last_step) : "-") + ")";
        }
        s += "\n";
      }
      break;
    case RootCause::Kind::kRescale:
      s += cause->message + "\n";
      break;
    case RootCause::Kind::kAgentLost:
      s += "lost the agent of node " + std::to_string(cause->node_rank) + " on host " + cause->host +
           ": " + cause->message + "\n";
      break;
    case RootCause::Kind::kAgentStopped:
      s += "the agent of node " + std::to_string(cause->node_rank) + " on host " + cause->host +
           " stopped its workers: " + cause->message + "\n";
      break;
    case RootCause::Kind::kAgentFailed:
      s += "node " + std::to_string(cause->node_rank) + " on host " + cause->host + ": " + cause->message + "\n";
      break;
    case RootCause::Kind::kSignal:
    case RootCause::Kind::kStartupFailed:
      s += cause->message + "\n";
      break;
  }
  if (cause->error && !cause->error->message.empty()) {
    s += "dslaunch: its error: " + cause->error->message + "\n";
  }
  if (!cause->stderr_tail.empty()) {
    s += "dslaunch: last lines of its stderr:\n";
    for (const auto& l : cause->stderr_tail) s += "dslaunch:   | " + l + "\n";
  }
  if (auto hint = FailureHint(cause->stderr_tail, cause->error ? cause->error->message : std::string())) {
    s += "dslaunch: " + *hint + "\n";
  }
  if (!cause->log_path.empty()) s += "dslaunch: full log: " + cause->host + ":" + cause->log_path + "\n";
  s += "dslaunch: stopped all workers; exit code " + std::to_string(tracker.ExitCode()) + "\n";
  return s;
}

void Console::WriteAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the console is gone (closed pipe): output is still in the log files
    off += static_cast<size_t>(n);
  }
}

void Console::ClearStatus() {
  if (status_.empty()) return;
  WriteAll(out_fd_, "\r\x1b[K");  // carriage return, erase to the end of the line
  status_.clear();
}

void Console::PrintOutput(const control::Output& output, const std::string& host) {
  std::vector<std::string> lines;
  const std::string* transient = nullptr;
  for (const auto& l : output.lines) {
    if (control::IsTransientLine(l)) {
      transient = &l;
    } else {
      lines.push_back(l);
    }
  }
  if (!interactive_) {
    if (!lines.empty()) WriteAll(output.stream == control::Stream::kStderr ? err_fd_ : out_fd_,
                                 FormatOutputLines(output.rank, host, lines));
    return;
  }
  std::string status = status_;
  ClearStatus();
  if (!lines.empty()) {
    WriteAll(output.stream == control::Stream::kStderr ? err_fd_ : out_fd_, FormatOutputLines(output.rank, host, lines));
  }
  if (transient != nullptr) {
    status = FormatOutputLines(output.rank, host, {transient->substr(0, transient->size() - 1)});
    status.pop_back();  // its newline
    if (width_ > 1 && status.size() >= static_cast<size_t>(width_)) status.resize(static_cast<size_t>(width_) - 1);
  }
  if (!status.empty()) {
    WriteAll(out_fd_, status);
    status_ = std::move(status);
  }
}

void Console::PrintError(const std::string& text) {
  ClearStatus();
  WriteAll(err_fd_, text);
}

}  // namespace dslaunch::launcher
