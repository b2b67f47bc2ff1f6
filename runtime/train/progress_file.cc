#include "runtime/train/progress_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace dslaunch::runtime {

ProgressFile::ProgressFile(std::string path, std::function<void(const std::string&)> warn)
    : path_(std::move(path)), warn_(std::move(warn)) {
  fd_.Reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_.valid()) {
    Warn("open");
    return;
  }
  struct stat st {};
  // The agent creates the file empty; one left from an earlier generation may hold a longer report.
  size_ = ::fstat(fd_.get(), &st) == 0 ? static_cast<size_t>(st.st_size) : SIZE_MAX;
}

void ProgressFile::Write(std::string_view report) {
  if (!fd_.valid()) return;
  if (report.size() < size_ && ::ftruncate(fd_.get(), 0) != 0) return Warn("truncate");
  size_ = SIZE_MAX;  // unknown until this write completes
  size_t done = 0;
  while (done < report.size()) {
    const ssize_t n = ::pwrite(fd_.get(), report.data() + done, report.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Warn("write");
    done += static_cast<size_t>(n);
  }
  size_ = report.size();
}

void ProgressFile::Warn(const std::string& what) {
  const std::string reason = std::strerror(errno);
  if (warned_ || !warn_) return;
  warned_ = true;
  warn_("progress file " + path_ + ": cannot " + what + ": " + reason +
        "; training goes on, but the agent may take this rank for hung (reported once)");
}

}  // namespace dslaunch::runtime
