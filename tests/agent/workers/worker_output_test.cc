// One worker's output as it arrives (agent/workers/worker_output.h): lines to the logs, the
// stderr tail, OUTPUT when tee is on, OUTPUT_LOST for a log that fails. Real files, /dev/full for
// a full disk.
#include "agent/workers/worker_output.h"

#include <doctest/doctest.h>
#include <fcntl.h>

#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

using control::Stream;
using dslaunch::testing::ReadWhole;
using dslaunch::testing::TempDir;

LogWriter FileLog(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  return LogWriter(UniqueFd(fd), path);
}

// A log on a full disk: every write fails with ENOSPC.
LogWriter FullLog() {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  return LogWriter(UniqueFd(fd), "/dev/full");
}

// The lines of the OUTPUT messages among `messages`, for `stream`; fails on another message.
std::vector<std::string> OutputLines(const std::vector<control::Message>& messages, Stream stream) {
  std::vector<std::string> lines;
  for (const auto& m : messages) {
    const auto* out = std::get_if<control::Output>(&m);
    REQUIRE(out != nullptr);
    CHECK(out->stream == stream);
    lines.insert(lines.end(), out->lines.begin(), out->lines.end());
  }
  return lines;
}

TEST_CASE("WorkerOutput logs whole lines without progress redraws and forwards every line when tee is on") {
  TempDir dir;
  WorkerOutput o(/*generation=*/3, /*rank=*/5, /*tee=*/true, FileLog(dir.path() + "/out"), FileLog(dir.path() + "/err"));
  auto first = o.Feed(Stream::kStdout, "a\n[#  ] 1/2\rb");
  REQUIRE(first.size() == 1);
  const auto& out = std::get<control::Output>(first[0]);
  CHECK(out.generation == 3);
  CHECK(out.rank == 5);
  CHECK(out.stream == Stream::kStdout);
  CHECK(out.lines == std::vector<std::string>{"a", "[#  ] 1/2\r"});
  CHECK_FALSE(o.closed(Stream::kStdout));
  CHECK(OutputLines(o.Close(Stream::kStdout), Stream::kStdout) == std::vector<std::string>{"b"});
  CHECK(o.closed(Stream::kStdout));
  CHECK(o.Close(Stream::kStdout).empty());  // once
  CHECK_FALSE(o.closed(Stream::kStderr));
  CHECK(ReadWhole(dir.path() + "/out") == "a\nb\n");
  CHECK(o.stderr_log_path() == dir.path() + "/err");
}

TEST_CASE("WorkerOutput without tee tells the launcher nothing while the logs take every line") {
  TempDir dir;
  WorkerOutput o(0, 0, /*tee=*/false, FileLog(dir.path() + "/out"), FileLog(dir.path() + "/err"));
  CHECK(o.Feed(Stream::kStderr, "one\ntwo").empty());
  CHECK(o.Close(Stream::kStderr).empty());
  CHECK(ReadWhole(dir.path() + "/err") == "one\ntwo\n");
  CHECK(ReadWhole(dir.path() + "/out").empty());
}

TEST_CASE("WorkerOutput keeps the last 20 lines of stderr, without stdout or progress redraws") {
  TempDir dir;
  WorkerOutput o(0, 0, false, FileLog(dir.path() + "/out"), FileLog(dir.path() + "/err"));
  std::string text;
  for (int i = 0; i < 25; ++i) text += "e" + std::to_string(i) + "\n";
  o.Feed(Stream::kStderr, text);
  o.Feed(Stream::kStderr, "bar\r");
  o.Feed(Stream::kStdout, "not stderr\n");
  std::vector<std::string> expected;
  for (int i = 5; i < 25; ++i) expected.push_back("e" + std::to_string(i));
  CHECK(o.stderr_tail() == expected);
}

TEST_CASE("WorkerOutput reports a log's first failed write at once and its totals when the stream ends") {
  TempDir dir;
  WorkerOutput o(/*generation=*/2, /*rank=*/1, /*tee=*/false, FileLog(dir.path() + "/out"), FullLog());
  auto first = o.Feed(Stream::kStderr, "x\nyy\n");
  REQUIRE(first.size() == 1);
  const auto& lost = std::get<control::OutputLost>(first[0]);
  CHECK(lost.generation == 2);
  CHECK(lost.rank == 1);
  CHECK(lost.stream == Stream::kStderr);
  CHECK(lost.path == "/dev/full");
  CHECK(lost.error == "No space left on device");
  CHECK(lost.lost_bytes == 5);
  CHECK(lost.lost_lines == 2);
  CHECK_FALSE(lost.final);
  CHECK(o.Feed(Stream::kStderr, "zzz\n").empty());  // reported once; counted still
  CHECK(o.Close(Stream::kStdout).empty());        // the other stream's log is fine
  auto last = o.Close(Stream::kStderr);
  REQUIRE(last.size() == 1);
  const auto& total = std::get<control::OutputLost>(last[0]);
  CHECK(total.lost_bytes == 9);
  CHECK(total.lost_lines == 3);
  CHECK(total.final);
  CHECK(o.Close(Stream::kStderr).empty());  // the totals once
  CHECK(o.stderr_tail() == std::vector<std::string>{"x", "yy", "zzz"});  // the tail is kept all the same
}

}  // namespace
}  // namespace dslaunch::agent
