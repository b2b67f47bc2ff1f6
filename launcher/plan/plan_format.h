// Human- and machine-readable forms of a LaunchPlan, printed by `dslaunch --dry-run`.
// The JSON schema is specified in docs/launch-plan.md. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/shell_quote.h"  // ShellJoin, used by callers of the table form

namespace dslaunch::launcher {

// Version of the JSON form ("version" field); bumped when a field changes meaning or disappears.
// 2: the node-wide variables moved from every worker's "env" to the node's "env".
inline constexpr int kPlanJsonVersion = 2;

// A table cell longer than this does not widen its column (it pushes the rest of its own row to
// the right instead), so one long slot list cannot pad every row of the table.
inline constexpr std::size_t kMaxPaddedCellWidth = 40;

// A table for people: the job-level fields once, then one "env NAME=VALUE" line per exported
// variable (the workers' variables outside the contract, sorted, shell-quoted), then one row per
// worker with node rank, host (user@host when a user is set), the node's slots as ranges
// ("0-3,6", on its first row), global rank, local rank and argv (shell-quoted, so a row can be
// pasted into a shell). Ends with a newline. Values are redacted as by RedactValue
// (exported_env.h). Size linear in the number of ranks.
std::string FormatPlanTable(const LaunchPlan& plan);

// The plan as pretty-printed JSON (2-space indent, keys of objects sorted, ends with a newline):
// every field of LaunchPlan, NodePlan and WorkerPlan, the node's env and each worker's own env
// included, with values redacted by RedactEnvironment (exported_env.h): a dry run is a log, and
// may be pasted into an issue.
std::string FormatPlanJson(const LaunchPlan& plan);

// "0-3,6,8-9": ascending slot ids with runs written as ranges ("" for none).
std::string SlotRanges(const std::vector<int>& slots);

}  // namespace dslaunch::launcher
