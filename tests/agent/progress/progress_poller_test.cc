// The poller between the progress files and the watchdog (agent/progress/progress_poller.h): real
// files, the time an input.
#include "agent/progress/progress_poller.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

using dslaunch::testing::TempDir;
using std::chrono::milliseconds;

constexpr milliseconds kInterval{200};

void Write(const std::string& path, const std::string& text, time_t mtime_sec) {
  { std::ofstream(path, std::ios::trunc) << text; }
  // A modification time of its own: a rewrite of the same size is seen without waiting for the
  // kernel's file clock to tick.
  timespec times[2] = {{0, UTIME_OMIT}, {mtime_sec, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

// A rank's new progress file, watched from t0 with a default timeout of one second.
struct WatchedRank {
  explicit WatchedRank(int rank) {
    auto logs = JobLogDir::Open({dir.path() + "/job-1", dir.path(), "job-1", ::getuid()});
    REQUIRE(logs.ok());
    auto created = CreateProgressFile(*logs, rank);
    REQUIRE(created.ok());
    path = *created;
    poller.Watch(rank, path, milliseconds(1000), t0);
  }
  TempDir dir;
  std::string path;
  ProgressPoller poller{kInterval};
  const ProgressPoller::Clock::time_point t0{};
};

TEST_CASE("ProgressPoller forwards a report with a step and finds the rank stalled once, its timeout after the report") {
  WatchedRank w(0);
  ProgressPoller& poller = w.poller;
  const std::string& path = w.path;
  const auto t0 = w.t0;
  ProgressPoll poll = poller.Poll(/*generation=*/2, t0 + milliseconds(200));
  CHECK(poll.progress.empty());
  CHECK(poll.stalls.empty());
  CHECK(poll.warnings.empty());

  Write(path, "7\n", 1000);
  poll = poller.Poll(2, t0 + milliseconds(400));
  REQUIRE(poll.progress.size() == 1);
  CHECK(poll.progress[0].generation == 2);
  CHECK(poll.progress[0].rank == 0);
  CHECK(poll.progress[0].step == 7);
  CHECK(poll.progress[0].figures.empty());
  CHECK(poller.last_step(0) == 7);

  for (int at = 600; at <= 1400; at += 200) {  // silence up to the timeout, not past it
    CAPTURE(at);
    poll = poller.Poll(2, t0 + milliseconds(at));
    CHECK(poll.progress.empty());
    CHECK(poll.stalls.empty());
  }
  poll = poller.Poll(2, t0 + milliseconds(1600));
  CHECK(poll.stalls == std::vector<Stall>{{0, 7, milliseconds(1200), milliseconds(1000)}});
  CHECK(poller.Poll(2, t0 + milliseconds(1800)).stalls.empty());  // once
}

TEST_CASE("ProgressPoller: a write without a step or figures feeds the watchdog only; a malformed one warns") {
  WatchedRank w(3);
  ProgressPoller& poller = w.poller;
  const std::string& path = w.path;
  const auto t0 = w.t0;
  Write(path, "timeout=5\n", 1000);  // the rank's own timeout, no step
  ProgressPoll poll = poller.Poll(0, t0 + milliseconds(200));
  CHECK(poll.progress.empty());
  CHECK(poll.warnings.empty());
  CHECK(poller.Describe(3, t0 + milliseconds(400)) == Stall{3, -1, milliseconds(200), milliseconds(5000)});

  Write(path, "4x\n", 1001);
  poll = poller.Poll(0, t0 + milliseconds(400));
  CHECK(poll.progress.empty());
  CHECK(poll.warnings ==
        std::vector<std::string>{"rank 3: progress file '" + path +
                                 "': step '4x' is not a non-negative integer (expected 'STEP "
                                 "[timeout=SECONDS] [NAME=NUMBER ...]'); the write still counts as progress"});
}

TEST_CASE("ProgressPoller reads a rank's last write at its exit and then watches it no more") {
  WatchedRank w(1);
  ProgressPoller& poller = w.poller;
  const std::string& path = w.path;
  const auto t0 = w.t0;
  Write(path, "9\n", 1000);  // just before the exit, after the last poll
  ProgressPoll poll = poller.OnExited(/*generation=*/4, 1, t0 + milliseconds(100));
  REQUIRE(poll.progress.size() == 1);
  CHECK(poll.progress[0].generation == 4);
  CHECK(poll.progress[0].step == 9);
  CHECK(poll.stalls.empty());
  CHECK(poller.last_step(1) == 9);
  Write(path, "10\n", 1001);
  poll = poller.Poll(4, t0 + milliseconds(5000));
  CHECK(poll.progress.empty());
  CHECK(poll.stalls.empty());  // an exited rank is never stalled
  CHECK(poller.last_step(1) == 9);
}

}  // namespace
}  // namespace dslaunch::agent
