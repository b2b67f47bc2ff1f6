// ProgressFile: the file a rank's progress reports go to (DSLAUNCH_PROGRESS_FILE, created by the
// agent; runtime/train/progress_report.h has the format). Each Write replaces the file's content with one
// report, normally in one pwrite at offset 0 (a report is never shorter than the one before unless
// its timeout got shorter: then the file is first truncated, and the agent may read the empty file
// in between, which the format allows as a report without a step).
//
// Never fails the run: the first error (opening or writing) is passed to `warn`, later ones are
// dropped, and training goes on; at worst the agent misses reports and takes the rank for hung.
// Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace dslaunch::runtime {

class ProgressFile {
 public:
  // Opens `path` for writing (creating it when missing, keeping its content until the first Write).
  ProgressFile(std::string path, std::function<void(const std::string&)> warn);

  void Write(std::string_view report);

 private:
  void Warn(const std::string& what);

  std::string path_;
  std::function<void(const std::string&)> warn_;
  UniqueFd fd_;
  size_t size_ = 0;  // bytes in the file after the last write
  bool warned_ = false;
};

}  // namespace dslaunch::runtime
