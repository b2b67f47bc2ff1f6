// The start relay's line protocol, the pure part (docs/ssh.md, "The start tree"; docs/protocol.md,
// "Start relay lines"). A start-tree head runs `dslaunch-agent --start_relay` on the SSH channel
// its parent (the launcher or another relay) opened; the parent writes commands to its stdin and
// reads reports from its stdout, one line each:
//
//   parent -> relay (stdin)                    relay -> parent (stdout)
//   plan {JSON}        the subtree to check    dslaunch-relay fail RANK REASON   pre-flight failure
//   secret SECRET      the job secret          dslaunch-relay checked            pre-flight done
//   start {JSON}       start one node's agent  dslaunch-relay out RANK LINE      a line an agent wrote
//   kill RANK          last-resort kill        dslaunch-relay exit RANK STATUS DETAIL   an agent ended
//   (EOF)              no more commands
//
// RANK is the job's node rank (the same at every level, so an intermediate relay passes its
// children's lines up unchanged). Every other line on the relay's stdout is output of the head's
// own agent. The secret travels only here, on the encrypted channel, never on a command line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/exit_status.h"
#include "common/status.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/start/agent_starter.h"
#include "launcher/start/ssh/options.h"

namespace dslaunch::launcher {

// The flag that makes dslaunch-agent a start relay instead of an agent.
inline constexpr std::string_view kStartRelayFlag = "--start_relay";
// Starts every line a relay reports to its parent.
inline constexpr std::string_view kRelayReportPrefix = "dslaunch-relay ";

// What a relay needs to check and start its subtree. The SSH options travel except home,
// agent_socket and local_user, which the relay takes from its own node (agent/main.cc).
struct RelayPlan {
  SshOptions ssh;
  PreflightChecks checks;
  int self_rank = 0;
  std::vector<NodePlan> nodes;  // the subtree in node-rank order; node_rank, user and host only
};

struct RelayCommand {
  enum class Kind { kPlan, kSecret, kStart, kKill };
  Kind kind = Kind::kPlan;
  RelayPlan plan;        // kPlan
  std::string secret;    // kSecret
  AgentCommand command;  // kStart (node_rank is the node to start)
  int rank = 0;          // kKill
};

// Each returns one line with its '\n'. FormatSecretLine: kInvalidArgument for a secret with a
// newline (it would not fit a line).
std::string FormatPlanLine(const RelayPlan& plan);
Result<std::string> FormatSecretLine(std::string_view secret);
std::string FormatStartLine(const AgentCommand& command);
std::string FormatKillLine(int rank);

// Parses a line of the relay's stdin (without '\n'). kInvalidArgument naming what is wrong: an
// unknown command, JSON that does not parse or lacks a field.
Result<RelayCommand> ParseRelayCommand(std::string_view line);

struct RelayReport {
  enum class Kind { kFail, kChecked, kOut, kExit };
  Kind kind = Kind::kChecked;
  int rank = 0;
  std::string text;                   // kFail: the reason; kOut: the line; kExit: the detail
  std::optional<ExitStatus> status;   // kExit: as sshd or waitpid reported it, nullopt when unknown
};

// Each returns one line with its '\n'; newlines inside `reason`, `line` and `detail` become spaces.
std::string FormatFailReport(int rank, std::string_view reason);
std::string FormatCheckedReport();
std::string FormatOutReport(int rank, std::string_view line);
std::string FormatExitReport(int rank, const std::optional<ExitStatus>& status, std::string_view detail);

// Parses a line of a relay's stdout (without '\n'): nullopt when it is not a well-formed relay
// report (then it is the head agent's own output).
std::optional<RelayReport> ParseRelayReport(std::string_view line);

}  // namespace dslaunch::launcher
