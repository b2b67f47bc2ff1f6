#include "launcher/cli/report_command.h"

#include <iostream>

#include "common/exit_codes.h"
#include "common/report/report_file.h"

namespace dslaunch::launcher {
namespace {

constexpr char kUsage[] =
    "Usage: dslaunch report JOB_DIR\n"
    "Rebuilds JOB_DIR/report.html from JOB_DIR/metrics.jsonl (written by rank 0 of the bundled runtime in\n"
    "its job directory: LOG_DIR/JOB_ID on rank 0's node) and prints its path.\n";

// A report that could not be written for another reason than the input (a full disk).
constexpr int kWriteFailed = 1;

}  // namespace

bool IsReportCommand(const std::vector<std::string>& argv) { return argv.size() >= 2 && argv[1] == kReportCommand; }

int RunReportCommand(const std::vector<std::string>& argv) {
  if (argv.size() == 3 && (argv[2] == "-h" || argv[2] == "--help")) {
    std::cout << kUsage;
    return kExitSuccess;
  }
  if (argv.size() != 3 || argv[2].empty()) {
    std::cerr << "dslaunch report: expected one JOB_DIR, got " << argv.size() - 2 << " arguments\n" << kUsage;
    return kExitUsage;
  }
  auto written = report::WriteJobReport(argv[2]);
  if (!written.ok()) {
    std::cerr << "dslaunch report: " << written.status().message() << "\n";
    const StatusCode code = written.status().code();
    return code == StatusCode::kNotFound || code == StatusCode::kInvalidArgument ? kExitUsage : kWriteFailed;
  }
  if (written->malformed > 0) {
    std::cerr << "dslaunch report: warning: " << written->malformed << " unreadable line(s) of metrics.jsonl skipped "
              << "(named in the report)\n";
  }
  std::cout << "report: " << written->path << "\n";
  return kExitSuccess;
}

}  // namespace dslaunch::launcher
