#include "launcher/job/output_loss.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

using control::OutputLost;
using control::Stream;

TEST_CASE("OutputLossLog prints a file's first failure once and sums it up at the end") {
  OutputLossLog log;
  CHECK(log.empty());
  CHECK(log.Summary("j1").empty());
  auto first = log.Add(OutputLost{0, 1, Stream::kStdout, "/l/rank1.stdout.log", "No space left on device", 10, 1, false},
                       "w-1");
  REQUIRE(first.has_value());
  CHECK(*first ==
        "dslaunch: rank 1 on w-1: cannot write its stdout log '/l/rank1.stdout.log': No space left on device; its "
        "output is missing from that file from here on\n");
  // The totals of the same file replace the first figures, and print nothing.
  CHECK_FALSE(
      log.Add(OutputLost{0, 1, Stream::kStdout, "/l/rank1.stdout.log", "No space left on device", 19001, 1000, true},
              "w-1")
          .has_value());
  // Another stream of the same rank, and another generation, are other files; a file whose stream
  // had not closed when the job ended is "at least".
  CHECK(log.Add(OutputLost{0, 1, Stream::kStderr, "/l/rank1.stderr.log", "File too large", 1, 1, true}, "w-1"));
  CHECK(log.Add(OutputLost{2, 0, Stream::kStdout, "/l/rank0.gen2.stdout.log", "Input/output error", 7, 2, false}, ""));
  CHECK_FALSE(log.empty());
  CHECK(log.Summary("j1") ==
        "dslaunch: job j1: output was lost: 3 log files are incomplete\n"
        "dslaunch:   rank 1 on w-1, stdout: 1000 lines (19001 bytes) not in '/l/rank1.stdout.log': No space left on "
        "device\n"
        "dslaunch:   rank 1 on w-1, stderr: 1 line (1 byte) not in '/l/rank1.stderr.log': File too large\n"
        "dslaunch:   rank 0 (generation 2), stdout: at least 2 lines (at least 7 bytes) not in "
        "'/l/rank0.gen2.stdout.log': Input/output error\n");
}

TEST_CASE("OutputLossLog says 'log file is' for one file") {
  OutputLossLog log;
  CHECK(log.Add(OutputLost{0, 0, Stream::kStdout, "p", "e", 2, 2, true}, ""));
  CHECK(log.Summary("j") == "dslaunch: job j: output was lost: 1 log file is incomplete\n"
                            "dslaunch:   rank 0, stdout: 2 lines (2 bytes) not in 'p': e\n");
}

}  // namespace
}  // namespace dslaunch::launcher
