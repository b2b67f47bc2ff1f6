// `dslaunch status [JOB_ID]` and `dslaunch logs JOB_ID RANK` (docs/cli.md, docs/observability.md
// "dslaunch status and logs"): parsing (pure), the rank table (pure), and the shell that finds the
// launcher through its state file (job_state_file.h) and asks its status server.
//
// A subcommand is recognised only as the first argument (`dslaunch status`); anywhere else the
// word is PROGRAM or an argument, so `dslaunch --nproc_per_node 2 status` and `dslaunch ./status`
// still run a program named status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/status/job_view.h"

namespace dslaunch::launcher {

struct StatusCommand {
  enum class Kind { kStatus, kLogs };
  Kind kind = Kind::kStatus;
  std::optional<std::string> job_id;  // status: absent = the only running job, or a list
  int rank = 0;                       // logs
  size_t lines = 0;                   // logs --lines; 0 = all the launcher keeps, or the whole file
  std::string log_dir;                // logs --log_dir: the --log_dir the job ran with
  std::optional<std::string> print;   // --help text
};

// True when argv[1] names a subcommand.
bool IsStatusSubcommand(const std::vector<std::string>& argv);

// Parses argv of a subcommand (argv[1] is "status" or "logs"). kInvalidArgument with the usage.
Result<StatusCommand> ParseStatusCommand(const std::vector<std::string>& argv);

// The job line and the rank table as `dslaunch status` prints them.
std::string FormatStatusTable(const JobView& view);

// The process's edges the subcommands need.
struct StatusEdges {
  std::string temp_dir;  // $TMPDIR or /tmp
  uid_t uid = 0;
  std::function<bool(int64_t pid)> alive;  // whether a launcher's pid still runs
};

// Runs the subcommand; returns the exit code (0, 1 when the job or log is not found or the
// launcher does not answer, kExitUsage for bad usage).
int RunStatusCommand(const StatusCommand& command, const StatusEdges& edges, std::ostream& out, std::ostream& err);

}  // namespace dslaunch::launcher
