// The status feed (launcher/job/status_feed.h) with a fake of what it reads of the job
// (StatusSource), a fake loop whose clock and timers the test moves, and a real JobBoard: when a
// view goes out, what it holds, what goes to the board's log tail, and how a straggler is told.
#include "launcher/job/status_feed.h"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/fakes/fake_job_loop.h"
#include "tests/support/console_pipe.h"

namespace dslaunch::launcher {
namespace {

using std::chrono::milliseconds;

struct FakeSource final : StatusSource {
  const JobTracker* tracker() const override { return tracker_of_job; }
  int generation() const override { return current_generation; }
  bool finished() const override { return over; }
  uint64_t store_bytes_sent() const override { return bytes; }
  const JobTracker* tracker_of_job = nullptr;
  int current_generation = 0;
  bool over = false;
  uint64_t bytes = 0;
};

// Two nodes of two ranks each, as the planner makes them.
LaunchPlan Plan(int generation) {
  PlanOptions options;
  options.program.program = "/bin/true";
  options.job_id = "J";
  options.generation = generation;
  auto plan = PlanLaunch({{"", "host-0", {0, 1}}, {"", "host-1", {0, 1}}}, options);
  REQUIRE(plan.ok());
  return *plan;
}

ProgramSpec Program() {
  ProgramSpec p;
  p.program = "train.py";
  p.args = {"--lr", "0.1"};
  return p;
}

struct Fixture {
  explicit Fixture(std::shared_ptr<JobBoard> b = std::make_shared<JobBoard>(), StragglerOptions s = {0, 4})
      : board(std::move(b)), console(-1, pipe.fds[1]), feed(board, s, loop, console, events, source) {}
  ConsolePipe pipe;
  std::shared_ptr<JobBoard> board;
  Console console;
  FakeJobLoop loop;
  EventLog events;
  FakeSource source;
  StatusFeed feed;
};

TEST_CASE("StatusFeed: a change goes out at once, news within kBoardPublishInterval when that time is up") {
  Fixture f;
  const int64_t started = f.loop.unix_ms;
  f.feed.Open("J", Program());
  const LaunchPlan plan = Plan(0);
  JobTracker tracker(plan);
  f.source.tracker_of_job = &tracker;
  f.feed.OnGeneration(plan);
  JobView v = f.board->View();
  CHECK(v.job_id == "J");
  CHECK(v.command == std::vector<std::string>{"train.py", "--lr", "0.1"});
  CHECK(v.started_ms == started);
  CHECK(v.now_ms == started);
  CHECK(v.state == "starting");
  CHECK(v.ranks.size() == 4);
  CHECK(f.loop.armed() == 0);

  // News without a change of state, 50 ms later: it waits for the interval, measured from the
  // last publish.
  f.loop.Advance(milliseconds(50));
  f.source.bytes = 4096;
  f.feed.Publish();
  f.feed.Publish();  // one timer for both
  CHECK(f.loop.armed() == 1);
  CHECK(f.loop.NextDeadline() == f.loop.now + milliseconds(150));
  CHECK(f.board->View().store_bytes_sent_total == 0);
  f.loop.Advance(milliseconds(149));
  CHECK(f.board->View().store_bytes_sent_total == 0);
  f.loop.Advance(milliseconds(1));
  v = f.board->View();
  CHECK(v.store_bytes_sent_total == 4096);
  CHECK(v.now_ms == started + 200);

  // A change of the job's state goes out at once, inside the interval.
  f.loop.Advance(milliseconds(10));
  REQUIRE(tracker.OnAgentRegistered(0) == Action::kNone);
  REQUIRE(tracker.OnAgentRegistered(1) == Action::kNone);
  REQUIRE(tracker.state() == JobState::kRunning);
  f.feed.Publish();
  CHECK(f.board->View().state == "running");
  CHECK(f.board->View().now_ms == started + 210);
  CHECK(f.loop.armed() == 0);
}

TEST_CASE("StatusFeed: the end goes out at once and no later view is scheduled") {
  Fixture f;
  f.feed.Open("J", Program());
  const LaunchPlan plan = Plan(0);
  JobTracker tracker(plan);
  f.source.tracker_of_job = &tracker;
  f.feed.OnGeneration(plan);
  f.loop.Advance(milliseconds(20));
  f.feed.Publish();  // news: waits for the timer
  CHECK(f.loop.armed() == 1);
  f.loop.Advance(milliseconds(5));
  f.source.over = true;
  f.feed.OnFinished(3);
  const JobView v = f.board->View();
  CHECK(v.state == "finished");
  CHECK(v.exit_code == 3);
  CHECK(v.outcome == "failed");
  CHECK(v.ended_ms == f.loop.unix_ms);
  CHECK(v.ended_ms - v.started_ms == 25);
  CHECK(f.loop.armed() == 0);
}

TEST_CASE("StatusFeed: a job the launcher was told to stop ends 'stopped', with the signal as its root cause") {
  Fixture f;
  f.feed.Open("J", Program());
  const LaunchPlan plan = Plan(0);
  JobTracker tracker(plan);
  f.source.tracker_of_job = &tracker;
  f.feed.OnGeneration(plan);
  REQUIRE(tracker.OnSignal(SIGTERM) == Action::kStopAll);
  f.source.over = true;
  f.feed.OnFinished(143);
  const JobView v = f.board->View();
  CHECK(v.outcome == "stopped");
  CHECK(v.exit_code == 143);
  CHECK(v.root_cause == "the launcher received SIGTERM");
}

TEST_CASE("StatusFeed: output lines of the current generation go to the board's log tail, progress bars not") {
  Fixture f;
  f.feed.Open("J", Program());
  const LaunchPlan plan = Plan(1);
  f.source.current_generation = 1;
  f.feed.OnGeneration(plan);
  f.feed.OnAgentMessage(0, control::Output{1, 1, control::Stream::kStdout, {"epoch 1", "37%\r", "epoch 2"}});
  f.feed.OnAgentMessage(0, control::Output{0, 1, control::Stream::kStdout, {"stale"}});  // generation 0
  CHECK(f.board->LogTail(1, 10) == std::vector<std::string>{"epoch 1", "epoch 2"});
}

TEST_CASE("StatusFeed: a straggler and its recovery are printed and recorded in the events file once each") {
  char path[] = "/tmp/dslaunch-status-feed-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  auto events = EventLog::Open(path);
  REQUIRE(events.ok());
  ConsolePipe pipe;
  Console console(-1, pipe.fds[1]);
  FakeJobLoop loop;
  FakeSource source;
  // No board: the view is kept for the straggler rule alone, and nothing is published.
  StatusFeed feed(nullptr, StragglerOptions{1.5, 1, 20, 1}, loop, console, *events, source);
  feed.Open("J", Program());
  feed.OnGeneration(Plan(0));
  control::WorkerProgress fast{0, 0, 1, {}};
  fast.figures.step_ms = 100.0;
  control::WorkerProgress slow{0, 1, 1, {}};
  slow.figures.step_ms = 500.0;
  feed.OnAgentMessage(0, fast);
  CHECK(pipe.Drain().empty());
  feed.OnAgentMessage(0, slow);
  const std::string line =
      "rank 1 on host-0 is a straggler since step 1: 500 ms/step against a median of 100 ms over 1 steps (5.0x; the "
      "rule: above 1.5x and 20 ms more, 1 check in a row)";
  CHECK(pipe.Drain() == "dslaunch: " + line + "\n");
  CHECK(loop.armed() == 0);  // no board: no publish timer either
  // Back to its peers' speed: cleared, told once.
  control::WorkerProgress recovered{0, 1, 2, {}};
  recovered.figures.step_ms = 110.0;
  feed.OnAgentMessage(0, recovered);
  const std::string cleared =
      "rank 1 on host-0 is no longer a straggler at step 2: 110 ms/step against a median of 100 ms over 1 steps";
  CHECK(pipe.Drain() == "dslaunch: " + cleared + "\n");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // The events file reads the wall clock itself: compare what follows the time.
  std::vector<std::string> lines;
  for (std::string l; std::getline(text, l);) lines.push_back(l);
  REQUIRE(lines.size() == 2);
  const std::string expected[] = {FormatEvent(0, 0, "straggler", line) , FormatEvent(0, 0, "straggler_cleared", cleared)};
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(lines[i].find(",\"generation\"") != std::string::npos);
    std::string want = expected[i].substr(expected[i].find(",\"generation\""));
    if (!want.empty() && want.back() == '\n') want.pop_back();
    CHECK(lines[i].substr(lines[i].find(",\"generation\"")) == want);
  }
  std::remove(path);
}

TEST_CASE("StatusFeed: without a board or the straggler rule it keeps nothing") {
  Fixture f(nullptr, StragglerOptions{0, 4});
  f.feed.Open("J", Program());
  f.feed.OnGeneration(Plan(0));
  f.feed.OnAgentMessage(0, control::Heartbeat{0, 1});
  f.feed.OnFinished(0);
  CHECK(f.loop.armed() == 0);
  CHECK(f.pipe.Drain().empty());
}

}  // namespace
}  // namespace dslaunch::launcher
