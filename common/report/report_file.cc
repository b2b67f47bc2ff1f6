#include "common/report/report_file.h"

#include <filesystem>
#include <system_error>

#include "common/file_io.h"
#include "common/report/html_report.h"
#include "common/report/metrics_log.h"

namespace dslaunch::report {

Result<WrittenReport> WriteJobReport(const std::string& job_dir) {
  std::error_code ec;
  const std::filesystem::path dir(job_dir);
  if (!std::filesystem::exists(dir, ec)) {
    return NotFoundError(job_dir + ": no such directory: give the job's directory (the launcher prints it; "
                         "DSLAUNCH_JOB_DIR of the job's workers)");
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return InvalidArgumentError(job_dir + ": not a directory: give the job's directory, which holds " +
                                kMetricsFileName);
  }
  const std::string metrics = (dir / kMetricsFileName).string();
  Result<std::string> text = ReadFile(metrics);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError(metrics + ": no such file: rank 0 of the bundled runtime (a train.json job) writes it on its node; "
                           "run this where rank 0 ran, or on a copy of its job directory");
    }
    return text.status();
  }
  const MetricsLog log = ParseMetricsLog(*text);
  // The directory's own name ("." or "DIR/" name it too), the job's id for a job directory.
  std::string title = std::filesystem::weakly_canonical(dir, ec).filename().string();
  if (ec || title.empty()) title = job_dir;
  WrittenReport written;
  written.path = (dir / kReportFileName).string();
  written.steps = static_cast<int64_t>(log.steps.size());
  written.malformed = log.malformed;
  DSLAUNCH_RETURN_IF_ERROR(WriteFileAtomically(written.path, RenderReport(log, ReportPage{title, metrics})));
  return written;
}

}  // namespace dslaunch::report
