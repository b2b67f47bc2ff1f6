// The console's handling of transient lines (progress bars), through real pipes.
#include "launcher/job/console.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "tests/support/console_pipe.h"

namespace dslaunch::launcher {
namespace {

control::Output Out(std::vector<std::string> lines) {
  control::Output o;
  o.rank = 0;
  o.lines = std::move(lines);
  return o;
}

TEST_CASE("An interactive console draws transient lines as one status line under the output") {
  ConsolePipe out, err;
  {
    Console console(out.fds[1], err.fds[1], /*interactive=*/true, /*width=*/24);
    console.PrintOutput(Out({"[#---] 1/4\r"}), "");
    CHECK(out.Drain() == "[rank 0] [#---] 1/4");
    // An ordinary line: the status is erased, the line printed, the newest status drawn under it.
    console.PrintOutput(Out({"step 1", "[##--] 2/4\r"}), "");
    CHECK(out.Drain() == "\r\x1b[K[rank 0] step 1\n[rank 0] [##--] 2/4");
    // A line on stderr: erased on stdout, printed on stderr, drawn again.
    control::Output e = Out({"warning"});
    e.stream = control::Stream::kStderr;
    console.PrintOutput(e, "");
    CHECK(out.Drain() == "\r\x1b[K[rank 0] [##--] 2/4");
    CHECK(err.Drain() == "[rank 0] warning\n");
    // A status longer than the terminal is cut so that it does not wrap.
    console.PrintOutput(Out({"[###-] 3/4 | a long tail of text\r"}), "");
    CHECK(out.Drain() == "\r\x1b[K[rank 0] [###-] 3/4 | a");  // 23 of 24 columns
  }
  // The end of the job erases it.
  CHECK(out.Drain() == "\r\x1b[K");
}

TEST_CASE("A console that is not a terminal drops transient lines and prints the rest as they are") {
  ConsolePipe out, err;
  {
    Console console(out.fds[1], err.fds[1], /*interactive=*/false);
    console.PrintOutput(Out({"[#---] 1/4\r", "step 1", "[##--] 2/4\r"}), "node1");
  }
  CHECK(out.Drain() == "[rank 0 node1] step 1\n");
}

}  // namespace
}  // namespace dslaunch::launcher
