#include "agent/workers/log_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dslaunch::agent {

std::optional<Status> LogWriter::Append(std::string_view block) {
  size_t off = 0;
  int err = 0;
  while (off < block.size()) {
    const ssize_t n = ::write(fd_.get(), block.data() + off, block.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // write(2) returns 0 only for a zero-length request; treat it as "no space" rather than spin.
    err = n < 0 ? errno : ENOSPC;
    break;
  }
  if (off == block.size()) return std::nullopt;
  // A line is lost when its newline did not reach the file: one begun but not ended counts too.
  const std::string_view unwritten = block.substr(off);
  lost_bytes_ += block.size() - off;
  lost_lines_ += static_cast<uint64_t>(std::count(unwritten.begin(), unwritten.end(), '\n'));
  if (!first_error_.empty()) return std::nullopt;
  first_error_ = std::strerror(err);
  return ErrnoError("cannot write log file '" + path_ + "'", err);
}

}  // namespace dslaunch::agent
