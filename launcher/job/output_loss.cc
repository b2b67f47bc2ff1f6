#include "launcher/job/output_loss.h"

namespace dslaunch::launcher {
namespace {

std::string StreamName(control::Stream stream) { return stream == control::Stream::kStdout ? "stdout" : "stderr"; }

std::string Who(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + (host.empty() ? "" : " on " + host);
}

std::string Count(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::optional<std::string> OutputLossLog::Add(const control::OutputLost& report, const std::string& host) {
  for (File& f : files_) {
    if (f.generation != report.generation || f.rank != report.rank || f.stream != report.stream) continue;
    f.lost_bytes = report.lost_bytes;
    f.lost_lines = report.lost_lines;
    f.final = report.final;
    return std::nullopt;
  }
  files_.push_back({report.generation, report.rank, report.stream, host, report.path, report.error, report.lost_bytes,
                    report.lost_lines, report.final});
  return "dslaunch: " + Who(report.rank, host) + ": cannot write its " + StreamName(report.stream) + " log '" +
         report.path + "': " + report.error + "; its output is missing from that file from here on\n";
}

std::string OutputLossLog::Summary(const std::string& job_id) const {
  if (files_.empty()) return "";
  std::string s = "dslaunch: job " + job_id + ": output was lost: " + Count(files_.size(), "log file is", "log files are") +
                  " incomplete\n";
  for (const File& f : files_) {
    const std::string at_least = f.final ? "" : "at least ";
    s += "dslaunch:   " + Who(f.rank, f.host) + (f.generation > 0 ? " (generation " + std::to_string(f.generation) + ")" : "") +
         ", " + StreamName(f.stream) + ": " + at_least + Count(f.lost_lines, "line", "lines") + " (" + at_least +
         Count(f.lost_bytes, "byte", "bytes") + ") not in '" + f.path + "': " + f.error + "\n";
  }
  return s;
}

}  // namespace dslaunch::launcher
