#include "launcher/start/ssh/preflight.h"

#include <algorithm>
#include <charconv>

#include "launcher/plan/shell_quote.h"

namespace dslaunch::launcher {
namespace {

std::string_view Trim(std::string_view s) {
  const char* space = " \t\r\n";
  size_t begin = s.find_first_not_of(space);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

// The last non-empty line of `text`, trimmed; empty when there is none.
std::string LastLine(std::string_view text) {
  text = Trim(text);
  size_t nl = text.find_last_of('\n');
  return std::string(Trim(nl == std::string_view::npos ? text : text.substr(nl + 1)));
}

std::string WithStderr(std::string reason, const CommandResult& result) {
  std::string err = LastLine(result.err);
  if (!err.empty()) reason += " (" + err + ")";
  return reason;
}

}  // namespace

std::string StagedAgentCommand(const PreflightChecks& checks) {
  std::string command;
  if (!checks.working_directory.empty()) {
    command += "cd -- " + ShellQuote(checks.working_directory) + " || exit " +
               std::to_string(kPreflightNoWorkdirExit) + "; ";
  }
  if (!checks.agent_path.empty()) {
    command += "v=$(" + ShellQuote(checks.agent_path) + " --version) || exit; ";
  } else {
    command += "v=; ";
  }
  command += "printf '" + std::string(kReadyPrefix) + "%s %s\\n' \"$$\" \"$v\"; ";
  command += "IFS= read -r c || exit 0; eval \"exec $c\"";
  return command;
}

std::optional<ReadyLine> ParseReadyLine(std::string_view line) {
  if (!line.starts_with(kReadyPrefix)) return std::nullopt;
  line.remove_prefix(kReadyPrefix.size());
  ReadyLine ready;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), ready.pid);
  if (ec != std::errc() || ready.pid <= 0 || end == line.data() + line.size() || *end != ' ') return std::nullopt;
  ready.version = std::string(Trim(std::string_view(end + 1, line.data() + line.size() - (end + 1))));
  return ready;
}

std::optional<std::string> VersionFailure(const PreflightChecks& checks, std::string_view reported) {
  reported = Trim(reported);
  if (reported == Trim(checks.agent_version)) return std::nullopt;
  return "agent '" + checks.agent_path + "' reports '" + std::string(reported) + "', the launcher needs '" +
         checks.agent_version + "'";
}

std::string EndedFailure(const PreflightChecks& checks, const CommandResult& result) {
  const std::string agent = "agent '" + checks.agent_path + "'";
  if (result.exit == ExitStatus::Exited(kPreflightNoWorkdirExit) && !checks.working_directory.empty()) {
    return WithStderr("working directory '" + checks.working_directory + "' does not exist or is not accessible",
                      result);
  }
  if (result.exit == ExitStatus::Exited(127)) return WithStderr(agent + " not found", result);
  if (result.exit == ExitStatus::Exited(126)) return WithStderr(agent + " is not executable", result);
  return WithStderr("'" + checks.agent_path + " --version' ended with " + DescribeExitStatus(result.exit), result);
}

Result<std::string> StagedAgentInput(const std::vector<std::string>& argv, std::string_view secret) {
  for (const std::string& word : argv) {
    if (word.find_first_of(std::string_view("\0\n", 2)) != std::string::npos) {
      return InvalidArgumentError("the agent's command line holds a NUL byte or a newline: '" + word + "'");
    }
  }
  if (secret.find('\n') != std::string_view::npos) return InvalidArgumentError("the job secret holds a newline");
  std::string input = ShellJoin(argv);
  input += '\n';
  input += secret;
  input += '\n';
  return input;
}

std::string KillCommand(pid_t pid) {
  const std::string p = std::to_string(pid);
  return "kill -KILL -" + p + " 2>/dev/null || kill -KILL " + p;
}

std::string FormatPreflightReport(std::vector<NodeFailure> failures, size_t node_count) {
  std::sort(failures.begin(), failures.end(),
            [](const NodeFailure& a, const NodeFailure& b) { return a.node_rank < b.node_rank; });
  std::string report = "pre-flight failed on " + std::to_string(failures.size()) + " of " +
                       std::to_string(node_count) + (node_count == 1 ? " node" : " nodes") +
                       "; nothing was started:";
  for (const NodeFailure& f : failures) {
    std::string reason = f.reason;
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    report += "\n  node " + std::to_string(f.node_rank) + " (" + f.host + "): " + reason;
  }
  return report;
}

}  // namespace dslaunch::launcher
