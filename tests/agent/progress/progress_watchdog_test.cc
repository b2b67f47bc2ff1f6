// The pure half of hang detection: the progress report grammar and the watchdog's decisions, with
// time as an input.
#include "agent/progress/progress_watchdog.h"

#include <doctest/doctest.h>

#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace dslaunch::agent {
namespace {

using std::chrono::milliseconds;
using Clock = ProgressWatchdog::Clock;

constexpr std::optional<int64_t> kNoStep;
constexpr std::optional<milliseconds> kNoTimeout;

TEST_CASE("ParseProgressReport reads STEP [timeout=SECONDS]") {
  struct Case {
    std::string text;
    std::optional<int64_t> step;
    std::optional<milliseconds> timeout;
  };
  const std::vector<Case> cases = {
      {"", kNoStep, kNoTimeout},
      {"\n", kNoStep, kNoTimeout},
      {"  \t ", kNoStep, kNoTimeout},
      {"41", 41, kNoTimeout},
      {"41\n", 41, kNoTimeout},
      {"41\r\n", 41, kNoTimeout},
      {"  41 \t", 41, kNoTimeout},
      {"007", 7, kNoTimeout},
      {"41 timeout=90", 41, milliseconds(90000)},
      {"0 timeout=0\n", 0, milliseconds(0)},
      {"7\ttimeout=0.3\n", 7, milliseconds(300)},  // exact: not 300.00000000000006 rounded up
      {"timeout=1.5", kNoStep, milliseconds(1500)},
      {"1 timeout=2.", 1, milliseconds(2000)},
      {"1 timeout=.25", 1, milliseconds(250)},
      {"1 timeout=0.0001", 1, milliseconds(1)},    // rounded up: positive is never "off"
      {"1 timeout=1.0015", 1, milliseconds(1002)},
      {"1 timeout=1.0010", 1, milliseconds(1001)},
      {"1 timeout=0.000", 1, milliseconds(0)},
      {"1 timeout=0000000000000000000005", 1, milliseconds(5000)},
      {"1 timeout=2592000", 1, milliseconds(2592000000)},  // kMaxProgressTimeout
      {"9223372036854775807", std::numeric_limits<int64_t>::max(), kNoTimeout},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto r = ParseProgressReport(c.text);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->step == c.step);
    CHECK(r->timeout == c.timeout);
  }
}

TEST_CASE("ParseProgressReport says what is wrong with a malformed report") {
  const std::string expected = " (expected 'STEP [timeout=SECONDS] [NAME=NUMBER ...]')";
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"-1", "step '-1' is not a non-negative integer"},
      {"4x", "step '4x' is not a non-negative integer"},
      {"1.5", "step '1.5' is not a non-negative integer"},
      {"step=3",
       "unknown figure 'step' (known: timeout, step_ms, compute_ms, loss, tokens_per_s, val_loss, val_step, ckpt_s, "
       "ckpt_bytes, ckpt_step)"},
      {std::string("\x01\xff", 2), "step '\\x01\\xff' is not a non-negative integer"},
      {"9223372036854775808", "step '9223372036854775808' is out of range"},
      {"1 2", "unexpected '2' after the step"},
      {"1 Timeout=3",
       "unknown figure 'Timeout' (known: timeout, step_ms, compute_ms, loss, tokens_per_s, val_loss, val_step, ckpt_s, "
       "ckpt_bytes, ckpt_step)"},
      {"1 =3", "unexpected '=3' after the step"},
      {"1 loss=2 7", "unexpected '7' after loss"},
      {"1 loss=2 loss=3", "loss given twice"},
      {"1 loss=nan", "loss 'nan' is not a finite number"},
      {"1 loss=inf", "loss 'inf' is not a finite number"},
      {"1 loss=", "loss '' is not a finite number"},
      {"1 loss=2x", "loss '2x' is not a finite number"},
      {"1 loss=+2", "loss '+2' is not a finite number"},
      {"1 step_ms=-1", "step_ms '-1' is negative"},
      {"1 tokens_per_s=-0.5", "tokens_per_s '-0.5' is negative"},
      {"1 ckpt_s=1e999", "ckpt_s '1e999' is not a finite number"},
      {"1 ckpt_bytes=1.5", "ckpt_bytes '1.5' is not a non-negative integer"},
      {"1 ckpt_bytes=-3", "ckpt_bytes '-3' is not a non-negative integer"},
      {"1 val_step=99999999999999999999", "val_step '99999999999999999999' is not a non-negative integer"},
      {"1 timeout=1 2", "unexpected '2' after the timeout"},
      {"timeout=1 3", "unexpected '3' after the timeout"},
      {"timeout=1 timeout=2", "timeout given twice"},
      {"1 timeout=", "timeout '' is not a number of seconds >= 0"},
      {"1 timeout=.", "timeout '.' is not a number of seconds >= 0"},
      {"1 timeout=-1", "timeout '-1' is not a number of seconds >= 0"},
      {"1 timeout=1e3", "timeout '1e3' is not a number of seconds >= 0"},
      {"1 timeout=inf", "timeout 'inf' is not a number of seconds >= 0"},
      {"1 timeout=1.2.3", "timeout '1.2.3' is not a number of seconds >= 0"},
      {"1 timeout=3s", "timeout '3s' is not a number of seconds >= 0"},
      {"1 timeout=2592000.001",
       "timeout '2592000.001' is above the limit of 2592000 s (timeout=0 turns the watchdog off)"},
      {"1 timeout=99999999999999999999",
       "timeout '99999999999999999999' is above the limit of 2592000 s (timeout=0 turns the watchdog off)"},
      {"1\n2\n", "more than one line (rewrite the file for each report rather than append to it)"},
      {"1\n\n", "more than one line (rewrite the file for each report rather than append to it)"},
      {std::string(kMaxProgressReportBytes + 1, '1'), "a report of more than 512 bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto r = ParseProgressReport(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.message + expected);
  }
  // Exactly the limit is still a report.
  std::string longest(kMaxProgressReportBytes, ' ');
  longest.back() = '5';
  CHECK(ParseProgressReport(longest).ok());
}

TEST_CASE("ParseProgressReport reads the figures after the step, in any order, old reports still parse") {
  auto old = ParseProgressReport("41 timeout=90\n");
  REQUIRE(old.ok());
  CHECK(old->step == 41);
  CHECK(old->figures.empty());

  auto full = ParseProgressReport(
      "12 loss=2.5 timeout=60 step_ms=198.25 compute_ms=150 tokens_per_s=1.5e4 val_loss=-0.125 val_step=10 ckpt_s=3 "
      "ckpt_bytes=123456789012 ckpt_step=10\n");
  REQUIRE_MESSAGE(full.ok(), full.status().ToString());
  CHECK(full->step == 12);
  CHECK(full->timeout == milliseconds(60000));
  CHECK(full->figures.step_ms == 198.25);
  CHECK(full->figures.compute_ms == 150.0);
  CHECK(full->figures.loss == 2.5);
  CHECK(full->figures.tokens_per_s == 15000.0);
  CHECK(full->figures.val_loss == -0.125);
  CHECK(full->figures.val_step == 10);
  CHECK(full->figures.ckpt_s == 3.0);
  CHECK(full->figures.ckpt_bytes == 123456789012);
  CHECK(full->figures.ckpt_step == 10);

  auto no_step = ParseProgressReport("loss=1");
  REQUIRE(no_step.ok());
  CHECK(no_step->step == kNoStep);
  CHECK(no_step->figures.loss == 1.0);
}

TEST_CASE("FormatProgressFigures writes what ParseProgressReport reads back") {
  ProgressFigures figures;
  CHECK(FormatProgressFigures(figures).empty());
  figures.step_ms = 198.25;
  figures.loss = 2.3125081;
  figures.tokens_per_s = 15234.5;
  figures.val_loss = 2.5;
  figures.val_step = 10;
  figures.ckpt_s = 0.5;
  figures.ckpt_bytes = 123456789012;
  figures.ckpt_step = 10;
  const std::string text = "7 timeout=90" + FormatProgressFigures(figures) + "\n";
  CHECK(text ==
        "7 timeout=90 step_ms=198.25 loss=2.3125081 tokens_per_s=15234.5 val_loss=2.5 val_step=10 ckpt_s=0.5 "
        "ckpt_bytes=123456789012 ckpt_step=10\n");
  auto parsed = ParseProgressReport(text);
  REQUIRE(parsed.ok());
  CHECK(parsed->figures == figures);
  // A figure that is not finite is left out, not written as something the parser refuses.
  ProgressFigures diverged;
  diverged.loss = std::numeric_limits<double>::infinity();
  diverged.step_ms = 3;
  CHECK(FormatProgressFigures(diverged) == " step_ms=3");
}

// A scenario for the watchdog: events at given milliseconds, Check every kTick (except where a
// pause says the checker was not running), and the stalls it returned, with when.
constexpr milliseconds kTick{100};

struct Event {
  enum Kind { kStart, kReport, kExit, kPauseChecks } kind;
  int at_ms;
  int rank = 0;
  std::string report_or_default;  // kReport: the report's text; kStart: the default timeout in ms
  int until_ms = 0;               // kPauseChecks: no Check before this time
};
Event Start(int at_ms, int rank, int default_ms) {
  return {Event::kStart, at_ms, rank, std::to_string(default_ms)};
}
Event Report(int at_ms, int rank, std::string text) { return {Event::kReport, at_ms, rank, std::move(text)}; }
Event Exit(int at_ms, int rank) { return {Event::kExit, at_ms, rank, ""}; }
Event PauseChecks(int from_ms, int until_ms) { return {Event::kPauseChecks, from_ms, 0, "", until_ms}; }

struct Seen {
  int at_ms;
  Stall stall;
  bool operator==(const Seen&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << "{at " << s.at_ms << " ms: rank " << s.stall.rank << ", last step " << s.stall.last_step
            << ", silence " << s.stall.silence.count() << " ms, timeout " << s.stall.timeout.count() << " ms}";
}
// Stalls as text, so that a failed comparison shows them.
std::string Show(const std::vector<Seen>& seen) {
  std::ostringstream os;
  for (const auto& s : seen) os << s << "\n";
  return os.str();
}
Seen At(int at_ms, int rank, int64_t last_step, int silence_ms, int timeout_ms) {
  return {at_ms, Stall{rank, last_step, milliseconds(silence_ms), milliseconds(timeout_ms)}};
}

std::vector<Seen> Run(const std::vector<Event>& events, int end_ms, ProgressWatchdog* keep = nullptr) {
  ProgressWatchdog local(kTick);
  ProgressWatchdog& w = keep ? *keep : local;
  const Clock::time_point t0{};  // any origin: only differences matter
  std::vector<Seen> seen;
  int paused_until = -1;
  for (int t = 0; t <= end_ms; t += static_cast<int>(kTick.count())) {
    const Clock::time_point now = t0 + milliseconds(t);
    for (const Event& e : events) {
      if (e.at_ms != t) continue;
      switch (e.kind) {
        case Event::kStart: w.Start(e.rank, now, milliseconds(std::stoi(e.report_or_default))); break;
        case Event::kReport: {
          auto r = ParseProgressReport(e.report_or_default);
          REQUIRE(r.ok());
          w.OnReport(e.rank, now, *r);
          break;
        }
        case Event::kExit: w.OnExited(e.rank); break;
        case Event::kPauseChecks: paused_until = e.until_ms; break;
      }
    }
    if (t < paused_until) continue;
    for (const Stall& s : w.Check(now)) seen.push_back({t, s});
  }
  return seen;
}

TEST_CASE("ProgressWatchdog finds the ranks silent for longer than their timeout, each once") {
  struct Case {
    std::string name;
    std::vector<Event> events;
    std::vector<Seen> expected;
  };
  const std::vector<Case> cases = {
      {"no default and no timeout= of its own: no watchdog", {Start(0, 0, 0)}, {}},
      {"the default counts from the start", {Start(0, 0, 1000)}, {At(1100, 0, -1, 1100, 1000)}},
      {"silence equal to the timeout is not yet a stall", {Start(0, 0, 1000), Report(300, 0, "1")},
       {At(1400, 0, 1, 1100, 1000)}},
      {"reports keep a rank alive; its silence counts from the last one",
       {Start(0, 0, 1000), Report(500, 0, "1"), Report(1000, 0, "2"), Report(1500, 0, "3"), Report(2000, 0, "4")},
       {At(3100, 0, 4, 1100, 1000)}},
      {"the rank's own timeout replaces the default", {Start(0, 0, 5000), Report(200, 0, "3 timeout=1")},
       {At(1300, 0, 3, 1100, 1000)}},
      {"a rank asks for a watchdog that the launcher did not set", {Start(0, 0, 0), Report(200, 0, "0 timeout=1")},
       {At(1300, 0, 0, 1100, 1000)}},
      {"timeout=0 turns the default off", {Start(0, 0, 1000), Report(500, 0, "2 timeout=0")}, {}},
      {"a later timeout= replaces an earlier one",
       {Start(0, 0, 0), Report(100, 0, "1 timeout=1"), Report(900, 0, "2 timeout=3")},
       {At(4000, 0, 2, 3100, 3000)}},
      {"a report without a step keeps the last step; a timeout= alone is a report too",
       {Start(0, 0, 1000), Report(100, 0, "5"), Report(600, 0, ""), Report(1500, 0, "timeout=2")},
       {At(3600, 0, 5, 2100, 2000)}},
      {"an exited rank is not stalled", {Start(0, 0, 1000), Exit(500, 0)}, {}},
      {"reports after an exit change nothing", {Start(0, 0, 1000), Exit(500, 0), Report(600, 0, "9 timeout=1")}, {}},
      {"a report for a rank never started changes nothing", {Report(100, 4, "1 timeout=1")}, {}},
      {"only the silent rank of several",
       {Start(0, 0, 1000), Start(0, 1, 1000), Start(0, 2, 0), Report(800, 0, "1"), Report(1600, 0, "2"),
        Report(2400, 0, "3"), Report(3000, 0, "4")},
       {At(1100, 1, -1, 1100, 1000), At(4100, 0, 4, 1100, 1000)}},
      {"ranks stalled at the same check come back together, by rank",
       {Start(0, 3, 1000), Start(0, 1, 1000)}, {At(1100, 1, -1, 1100, 1000), At(1100, 3, -1, 1100, 1000)}},
      {"a rank started again is watched afresh", {Start(0, 0, 1000), Report(500, 0, "7 timeout=0"), Start(800, 0, 1000)},
       {At(1900, 0, -1, 1100, 1000)}},
      {"a checker that did not run is no evidence against a rank: the time beyond one interval is not silence",
       {Start(0, 0, 1000), PauseChecks(400, 5000)},
       // Checks at 300 and then 5000: 4600 ms beyond the 100 ms interval are not counted, so the
       // silence at 5000 is 400 ms, and 1100 ms at 5700.
       {At(5700, 0, -1, 1100, 1000)}},
      {"a check late by no more than one interval counts in full",
       {Start(0, 0, 1000), PauseChecks(900, 1000)},  // checks at 800 and 1000: late by 100 ms
       {At(1100, 0, -1, 1100, 1000)}},
      {"a check late by more than one interval: the excess is not silence",
       {Start(0, 0, 1000), PauseChecks(900, 1100)},  // checks at 800 and 1100: 200 ms are not counted
       {At(1300, 0, -1, 1100, 1000)}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(Show(Run(c.events, 10000)) == Show(c.expected));
  }
}

TEST_CASE("ProgressWatchdog rounds a stall's silence up to whole milliseconds, above the timeout") {
  ProgressWatchdog w(kTick);
  const Clock::time_point t0{};
  w.Start(0, t0, milliseconds(1000));
  CHECK(w.Check(t0 + milliseconds(1000)).empty());
  const auto stalls = w.Check(t0 + milliseconds(1000) + std::chrono::microseconds(1));
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].silence == milliseconds(1001));
}

TEST_CASE("ProgressWatchdog keeps a rank's last step after it exits or stalls") {
  ProgressWatchdog w(kTick);
  CHECK(w.last_step(0) == -1);  // unknown rank
  Run({Start(0, 0, 0), Start(0, 1, 1000), Report(100, 0, "12"), Report(200, 1, "34"), Exit(300, 0)}, 2000, &w);
  CHECK(w.last_step(0) == 12);
  CHECK(w.last_step(1) == 34);
  CHECK(w.last_step(2) == -1);
}

TEST_CASE("DescribeStall names the rank, its silence, its last step and the timeout") {
  CHECK(DescribeStall({3, 41, milliseconds(3100), milliseconds(3000)}) ==
        "rank 3 reported no progress for 3.1 s (last step 41, watchdog timeout 3.0 s)");
  CHECK(DescribeStall({0, -1, milliseconds(1140), milliseconds(1000)}) ==
        "rank 0 reported no progress for 1.1 s (no step reported, watchdog timeout 1.0 s)");
}

}  // namespace
}  // namespace dslaunch::agent
