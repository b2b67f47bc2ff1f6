#include "agent/node/fence_record.h"

#include <charconv>

namespace dslaunch::agent {
namespace {

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    size_t space = line.find(' ', i);
    if (space == std::string_view::npos) space = line.size();
    out.push_back(line.substr(i, space - i));
    i = space + 1;
  }
  return out;
}

template <typename T>
bool ParseNumber(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string FormatFenceRecord(const FenceRecord& record) {
  std::string out = "agent " + std::to_string(record.agent.pid) + " " + std::to_string(record.agent.start_time) + "\n";
  for (const RecordedWorker& w : record.workers) {
    out += "worker " + std::to_string(w.generation) + " " + std::to_string(w.rank) + " " +
           std::to_string(w.leader.pid) + " " + std::to_string(w.leader.start_time) + "\n";
  }
  return out;
}

Result<FenceRecord> ParseFenceRecord(std::string_view text, std::string_view where) {
  FenceRecord record;
  bool have_agent = false;
  int line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    auto fail = [&](const std::string& what) {
      return InvalidArgumentError(std::string(where) + ":" + std::to_string(line_no) + ": " + what);
    };
    std::vector<std::string_view> f = Fields(line);
    if (f.empty()) return fail("empty line");
    if (f[0] == "agent") {
      if (f.size() != 3) return fail("agent line has " + std::to_string(f.size()) + " fields, expected 3");
      if (have_agent) return fail("a second agent line");
      if (!ParseNumber(f[1], record.agent.pid) || record.agent.pid <= 0) return fail("bad pid '" + std::string(f[1]) + "'");
      if (!ParseNumber(f[2], record.agent.start_time)) return fail("bad start time '" + std::string(f[2]) + "'");
      have_agent = true;
    } else if (f[0] == "worker") {
      if (f.size() != 5) return fail("worker line has " + std::to_string(f.size()) + " fields, expected 5");
      RecordedWorker w;
      if (!ParseNumber(f[1], w.generation) || w.generation < 0) return fail("bad generation '" + std::string(f[1]) + "'");
      if (!ParseNumber(f[2], w.rank) || w.rank < 0) return fail("bad rank '" + std::string(f[2]) + "'");
      if (!ParseNumber(f[3], w.leader.pid) || w.leader.pid <= 0) return fail("bad pid '" + std::string(f[3]) + "'");
      if (!ParseNumber(f[4], w.leader.start_time)) return fail("bad start time '" + std::string(f[4]) + "'");
      record.workers.push_back(w);
    } else {
      return fail("unknown line kind '" + std::string(f[0]) + "' (expected agent or worker)");
    }
  }
  if (!have_agent) return InvalidArgumentError(std::string(where) + ": no agent line");
  return record;
}

Fate JudgeProcess(const RecordedProcess& recorded, const std::optional<Sighting>& at_pid) {
  if (!at_pid || at_pid->zombie || at_pid->start_time != recorded.start_time) return Fate::kGone;
  return Fate::kAlive;
}

Fate JudgeGroup(const RecordedProcess& leader_record, const std::optional<Sighting>& leader, int other_members) {
  if (leader && leader->start_time != leader_record.start_time) return Fate::kGone;  // recycled: the group is empty
  if (leader && !leader->zombie) return Fate::kAlive;
  return other_members > 0 ? Fate::kAlive : Fate::kGone;
}

}  // namespace dslaunch::agent
