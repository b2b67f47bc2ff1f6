#include "launcher/machine/open_files_limit.h"

#include <sys/resource.h>

#include <cerrno>

namespace dslaunch::launcher {

Result<OpenFilesLimit> RaiseOpenFilesLimit() {
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return ErrnoError("getrlimit RLIMIT_NOFILE", errno);
  OpenFilesLimit before{static_cast<uint64_t>(now.rlim_cur), static_cast<uint64_t>(now.rlim_max)};
  if (now.rlim_cur < now.rlim_max) {
    rlimit raised{now.rlim_max, now.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return ErrnoError("raise the soft RLIMIT_NOFILE from " + std::to_string(before.soft) +
                            " to the hard limit " + std::to_string(before.hard),
                        errno);
    }
  }
  return before;
}

}  // namespace dslaunch::launcher
