// The I/O shell of the report: a job directory's metrics.jsonl in, its report.html out
// (docs/observability.md, "Report at the end"). The worker's rank 0 calls it at the end of a run;
// `dslaunch report JOB_DIR` calls it for a finished job.
#pragma once

#include <string>

#include "common/status.h"

namespace dslaunch::report {

inline constexpr char kMetricsFileName[] = "metrics.jsonl";
inline constexpr char kReportFileName[] = "report.html";

// What WriteJobReport wrote.
struct WrittenReport {
  std::string path;        // JOB_DIR/report.html
  int64_t steps = 0;       // step records drawn from
  int64_t malformed = 0;   // lines skipped
};

// Reads `job_dir`/metrics.jsonl and writes `job_dir`/report.html (atomically: readers see the
// old report or the new). Errors name the path and what to do: kNotFound for a missing directory
// or metrics file, kInvalidArgument for a path that is not a directory, the I/O error otherwise.
Result<WrittenReport> WriteJobReport(const std::string& job_dir);

}  // namespace dslaunch::report
