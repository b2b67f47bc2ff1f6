// How an agent starts over SSH, the pure part (docs/ssh.md, "Start-up"): the one remote command
// each node runs, how its answers read, what the launcher writes to it, and the pre-flight report.
//
// Each node runs ONE login shell for both pre-flight and start ("staged start"), because the
// remote login shell's start-up is the largest per-node cost (a .bashrc can take half a second):
//   cd -- WD || exit 97; v=$(AGENT --version) || exit; printf 'dslaunch-ready %s %s\n' "$$" "$v";
//   IFS= read -r c || exit 0; eval "exec $c"
// Pre-flight waits for the ready line (or the command's end) on every node. To start, the launcher
// writes the agent's shell-quoted argv and the secret, each on a line, and closes stdin: the shell
// execs the agent (same pid, so "$$" is the agent's pid), which reads the secret. To cancel, the
// launcher closes stdin: `read` fails and the shell exits without starting anything.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/start/agent_starter.h"
#include "launcher/start/ssh/connection.h"

namespace dslaunch::launcher {

// The exit code StagedAgentCommand uses when it cannot enter the working directory. Chosen outside
// the shell's own codes (126, 127, 128+N) and unlikely from `dslaunch-agent --version`.
inline constexpr int kPreflightNoWorkdirExit = 97;

// Starts the line the staged command prints when the node passed its checks: "dslaunch-ready PID VERSION".
inline constexpr std::string_view kReadyPrefix = "dslaunch-ready ";

// The staged command for `checks` (see the file comment), every path shell-quoted. Without a
// working directory there is no `cd`; without an agent path no version check (VERSION is empty).
std::string StagedAgentCommand(const PreflightChecks& checks);

struct ReadyLine {
  pid_t pid = 0;        // the remote shell, which becomes the agent
  std::string version;  // what `AGENT --version` printed (its first line)
};

// Parses a line of the staged command's stdout (without '\n'); nullopt unless it is a ready line.
std::optional<ReadyLine> ParseReadyLine(std::string_view line);

// Why the node fails pre-flight given the version its agent reported; nullopt when it matches
// checks.agent_version (surrounding whitespace ignored):
//   "agent '/p' reports 'dslaunch-agent 0.0.9', the launcher needs 'dslaunch-agent 0.1.0'"
std::optional<std::string> VersionFailure(const PreflightChecks& checks, std::string_view reported);

// Why the node failed, when the staged command ended before its ready line. Reasons:
//   "working directory '/x' does not exist or is not accessible (bash: line 1: cd: /x: No such ...)"
//   "agent '/p' not found (...)", "agent '/p' is not executable (...)",
//   "'/p --version' ended with exit code 3 (LAST STDERR LINE)"
std::string EndedFailure(const PreflightChecks& checks, const CommandResult& result);

// What the launcher writes to the staged command's stdin to start the agent: ShellJoin(argv), a
// newline, the secret, a newline. kInvalidArgument when a word holds NUL or a newline, or the secret
// a newline (neither fits a line).
Result<std::string> StagedAgentInput(const std::vector<std::string>& argv, std::string_view secret);

// The shell command that kills the agent with pid `pid` and its process group (the remote shell
// leads its own session): "kill -KILL -PID 2>/dev/null || kill -KILL PID". Works in dash and bash.
std::string KillCommand(pid_t pid);

using NodeFailure = PreflightFailure;  // launcher/start/agent_starter.h

// The report for failing nodes (sorted by node rank), one line per node:
//   "pre-flight failed on 2 of 4 nodes; nothing was started:\n"
//   "  node 2 (10.0.0.3): host key for 10.0.0.3 is not in known_hosts ...\n"
//   "  node 3 (10.0.0.4): agent '/opt/...' not found (...)"
// Multi-line reasons are joined into one line. No trailing newline.
std::string FormatPreflightReport(std::vector<NodeFailure> failures, size_t node_count);

}  // namespace dslaunch::launcher
