// OutputLossLog: what the launcher knows of ranks' output that did not reach their log files
// (OUTPUT_LOST, docs/launcher.md "Log files"), and how it tells the user: one line on the
// console when a file first fails, and a block at the end of the job naming every incomplete file
// with what it lost. The job's exit code does not change: the training itself succeeded or failed
// on its own. Pure: the job runner prints what it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/control_messages.h"

namespace dslaunch::launcher {

class OutputLossLog {
 public:
  // Records a report from the agent on `host`. Returns the console line (with its newline) when
  // it is the first report of that file, nullopt for a later one (the totals are kept).
  std::optional<std::string> Add(const control::OutputLost& report, const std::string& host);

  bool empty() const { return files_.empty(); }

  // The end-of-job block: a header line, then one line per incomplete file in the order they
  // failed, with the lines and bytes lost ("at least" while the rank's stream had not closed when
  // the job ended) and the first error. Empty when nothing was lost.
  std::string Summary(const std::string& job_id) const;

 private:
  struct File {
    int generation = 0;
    int rank = 0;
    control::Stream stream = control::Stream::kStdout;
    std::string host, path, error;
    uint64_t lost_bytes = 0, lost_lines = 0;
    bool final = false;
  };
  std::vector<File> files_;
};

}  // namespace dslaunch::launcher
