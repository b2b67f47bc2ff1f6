#include "agent/progress/progress_watchdog.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "common/text.h"

namespace dslaunch::agent {
namespace {

using std::chrono::milliseconds;

// A part of the report as it can be shown on one line of a terminal: bytes outside printable
// ASCII as \xNN.
std::string Shown(std::string_view part) {
  std::string out;
  for (unsigned char c : part) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

Status Malformed(const std::string& what) {
  return InvalidArgumentError(what + " (expected 'STEP [timeout=SECONDS] [NAME=NUMBER ...]')");
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Result<int64_t> ParseStep(std::string_view part) {
  if (!AllDigits(part)) return Malformed("step '" + Shown(part) + "' is not a non-negative integer");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t v = 0;
  for (char c : part) {
    const int d = c - '0';
    if (v > (kMax - d) / 10) return Malformed("step '" + Shown(part) + "' is out of range");
    v = v * 10 + d;
  }
  return v;
}

// Exact decimal arithmetic, no floating point: "0.3" is 300 ms, not 300.00000000000006 rounded up.
Result<milliseconds> ParseTimeout(std::string_view value) {
  const auto bad = [&] {
    return Malformed("timeout '" + Shown(value) + "' is not a number of seconds >= 0");
  };
  const size_t dot = value.find('.');
  const std::string_view whole = value.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : value.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return bad();
  if ((!whole.empty() && !AllDigits(whole)) || (!fraction.empty() && !AllDigits(fraction))) return bad();
  // Leading zeros are harmless; the limit check must not overflow on a long run of digits.
  const std::string_view significant = whole.substr(std::min(whole.find_first_not_of('0'), whole.size()));
  const auto too_long = [&] {
    return Malformed("timeout '" + Shown(value) + "' is above the limit of " +
                     std::to_string(kMaxProgressTimeout.count()) + " s (timeout=0 turns the watchdog off)");
  };
  if (significant.size() > 12) return too_long();
  int64_t ms = 0;
  for (char c : significant) ms = ms * 10 + (c - '0');
  ms *= 1000;
  for (size_t i = 0; i < fraction.size(); ++i) {
    const int d = fraction[i] - '0';
    if (i < 3) {
      ms += d * (i == 0 ? 100 : i == 1 ? 10 : 1);
    } else if (d != 0) {
      ms += 1;  // round up: a positive timeout never becomes 0 (off)
      break;
    }
  }
  if (milliseconds(ms) > kMaxProgressTimeout) return too_long();
  return milliseconds(ms);
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

Result<ProgressReport> ParseProgressReport(std::string_view text) {
  if (text.size() > kMaxProgressReportBytes) {
    return Malformed("a report of more than " + std::to_string(kMaxProgressReportBytes) + " bytes");
  }
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) {
    return Malformed("more than one line (rewrite the file for each report rather than append to it)");
  }
  ProgressReport report;
  std::string last;  // the part before, for messages ("the step", "the timeout", "loss")
  size_t pos = 0;
  while (true) {
    while (pos < text.size() && IsBlank(text[pos])) ++pos;
    if (pos == text.size()) break;
    size_t end = pos;
    while (end < text.size() && !IsBlank(text[end])) ++end;
    const std::string_view part = text.substr(pos, end - pos);
    pos = end;
    constexpr std::string_view kTimeout = "timeout=";
    const size_t equals = part.find('=');
    if (part.substr(0, kTimeout.size()) == kTimeout) {
      if (report.timeout) return Malformed("timeout given twice");
      DSLAUNCH_ASSIGN_OR_RETURN(report.timeout, ParseTimeout(part.substr(kTimeout.size())));
      last = "the timeout";
    } else if (equals != std::string_view::npos && equals > 0) {
      if (Status set = SetProgressFigure(report.figures, part.substr(0, equals), part.substr(equals + 1)); !set.ok()) {
        return Malformed(set.message());
      }
      last = std::string(part.substr(0, equals));
    } else if (!last.empty()) {
      return Malformed(std::string("unexpected '") + Shown(part) + "' after " + last);
    } else {
      DSLAUNCH_ASSIGN_OR_RETURN(report.step, ParseStep(part));
      last = "the step";
    }
  }
  return report;
}

std::string DescribeStall(const Stall& stall) {
  const std::string step =
      stall.last_step < 0 ? "no step reported" : "last step " + std::to_string(stall.last_step);
  return "rank " + std::to_string(stall.rank) + " reported no progress for " + FormatSeconds(stall.silence) +
         " (" + step + ", watchdog timeout " + FormatSeconds(stall.timeout) + ")";
}

ProgressWatchdog::ProgressWatchdog(milliseconds check_interval) : check_interval_(check_interval) {
  DSLAUNCH_CHECK(check_interval > milliseconds(0)) << "check interval must be positive";
}

void ProgressWatchdog::Start(int rank, Clock::time_point now, milliseconds default_timeout) {
  Rank r;
  r.running = true;
  r.last_report = now;
  r.default_timeout = default_timeout;
  ranks_[rank] = r;
}

void ProgressWatchdog::OnReport(int rank, Clock::time_point now, const ProgressReport& report) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || !it->second.running) return;
  Rank& r = it->second;
  r.last_report = now;
  if (report.step) r.last_step = *report.step;
  if (report.timeout) r.own_timeout = *report.timeout;
}

void ProgressWatchdog::OnExited(int rank) {
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second.running = false;
}

std::vector<Stall> ProgressWatchdog::Check(Clock::time_point now) {
  // Time the checker was not running: a call later than one interval past its due time.
  Clock::duration suspended{0};
  if (last_check_ && now - *last_check_ > 2 * check_interval_) suspended = now - *last_check_ - check_interval_;
  last_check_ = now;
  std::vector<Stall> stalls;
  for (auto& [rank, r] : ranks_) {
    if (!r.running) continue;
    r.last_report = std::min(now, r.last_report + suspended);
    const milliseconds timeout = TimeoutOf(r);
    if (timeout <= milliseconds(0)) continue;
    if (now - r.last_report <= timeout) continue;
    // Rounded up: a silence found longer than the timeout never reads as equal to it.
    const auto silence = std::chrono::ceil<milliseconds>(now - r.last_report);
    r.running = false;
    stalls.push_back(Stall{rank, r.last_step, silence, timeout});
  }
  return stalls;
}

Stall ProgressWatchdog::Describe(int rank, Clock::time_point now) const {
  Stall s{rank, -1, std::chrono::milliseconds(0), std::chrono::milliseconds(0)};
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return s;
  s.last_step = it->second.last_step;
  s.timeout = TimeoutOf(it->second);
  s.silence = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.last_report);
  return s;
}

int64_t ProgressWatchdog::last_step(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? -1 : it->second.last_step;
}

}  // namespace dslaunch::agent
