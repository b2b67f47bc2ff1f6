// The job's events file (--events_file, docs/elastic.md "Events file"): one JSON object per line,
// appended as things happen, so that a benchmark or a monitor can time a restart without parsing
// the console. FormatEvent is pure; EventLog owns the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/status.h"

namespace dslaunch::launcher {

// {"t_ms":T,"generation":G,"event":"E","detail":"D"} with D escaped for JSON.
std::string FormatEvent(int64_t unix_ms, int generation, const std::string& event, const std::string& detail);

class EventLog {
 public:
  EventLog() = default;  // writes nothing
  // Opens `path` for appending; an empty path writes nothing.
  static Result<EventLog> Open(const std::string& path);
  // Appends one line and flushes it; the wall clock is read here. Write errors are ignored: the
  // events file must never stop a job.
  void Record(int generation, const std::string& event, const std::string& detail = "");

 private:
  std::shared_ptr<std::FILE> file_;
};

}  // namespace dslaunch::launcher
