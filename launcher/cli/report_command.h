// `dslaunch report JOB_DIR`: rebuilds a job's report.html from its metrics.jsonl (docs/cli.md,
// "dslaunch report"; the page: docs/observability.md, "Report at the end").
#pragma once

#include <string>
#include <vector>

namespace dslaunch::launcher {

// The subcommand's word. A program of this exact name is started as `dslaunch ./report`; a name
// that only starts with it (`report.py`) is a program as before.
inline constexpr char kReportCommand[] = "report";

// Whether argv (argv[0] the program) asks for the subcommand: argv[1] is exactly "report".
bool IsReportCommand(const std::vector<std::string>& argv);

// Runs it: prints "report: PATH" and returns 0; or prints "dslaunch report: ..." naming the path
// and what to do, and returns kExitUsage (a wrong or missing JOB_DIR, no metrics.jsonl) or 1 (the
// report could not be written).
int RunReportCommand(const std::vector<std::string>& argv);

}  // namespace dslaunch::launcher
