// ConsolePipe: a pipe for a Console's (launcher/job/console.h) stdout or stderr in tests; its read
// end is non-blocking, and Drain() returns what was written since the last Drain().
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace dslaunch::launcher {

struct ConsolePipe {
  int fds[2] = {-1, -1};
  ConsolePipe() {
    REQUIRE(::pipe(fds) == 0);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  }
  ~ConsolePipe() {
    ::close(fds[0]);
    if (fds[1] >= 0) ::close(fds[1]);
  }
  ConsolePipe(const ConsolePipe&) = delete;
  ConsolePipe& operator=(const ConsolePipe&) = delete;
  std::string Drain() const {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

}  // namespace dslaunch::launcher
