#include "launcher/job/event_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/text.h"

namespace dslaunch::launcher {

std::string FormatEvent(int64_t unix_ms, int generation, const std::string& event, const std::string& detail) {
  return "{\"t_ms\":" + std::to_string(unix_ms) + ",\"generation\":" + std::to_string(generation) +
         ",\"event\":" + JsonString(event) + ",\"detail\":" + JsonString(detail) + "}\n";
}

Result<EventLog> EventLog::Open(const std::string& path) {
  EventLog log;
  if (path.empty()) return log;
  std::FILE* f = std::fopen(path.c_str(), "ae");
  if (f == nullptr) return ErrnoError("--events_file: cannot open '" + path + "' for appending", errno);
  log.file_.reset(f, &std::fclose);
  return log;
}

void EventLog::Record(int generation, const std::string& event, const std::string& detail) {
  if (!file_) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = FormatEvent(now, generation, event, detail);
  std::fwrite(line.data(), 1, line.size(), file_.get());
  std::fflush(file_.get());
}

}  // namespace dslaunch::launcher
