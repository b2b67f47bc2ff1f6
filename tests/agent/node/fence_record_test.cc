// The pure parts of fencing a lost node (docs/elastic.md, "Fencing a lost node"): the record's
// format and the judgement of recorded processes and groups (agent/node/fence_record.h).
#include <doctest/doctest.h>

#include "agent/node/fence_record.h"

namespace dslaunch::agent {
namespace {

TEST_CASE("FormatFenceRecord writes what ParseFenceRecord reads back") {
  FenceRecord r;
  r.agent = {4100, 987654};
  r.workers.push_back({0, 2, {4120, 987700}});
  r.workers.push_back({3, 5, {4188, 1234567890123ULL}});
  const std::string text = FormatFenceRecord(r);
  CHECK(text == "agent 4100 987654\nworker 0 2 4120 987700\nworker 3 5 4188 1234567890123\n");
  auto back = ParseFenceRecord(text, "/tmp/d/workers");
  REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  CHECK(back->agent.pid == 4100);
  CHECK(back->agent.start_time == 987654);
  REQUIRE(back->workers.size() == 2);
  CHECK(back->workers[1].generation == 3);
  CHECK(back->workers[1].rank == 5);
  CHECK(back->workers[1].leader.pid == 4188);
  CHECK(back->workers[1].leader.start_time == 1234567890123ULL);
}

TEST_CASE("ParseFenceRecord names the file and line of what it refuses") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"agent 1 2\nworker 0 0 5\n", "R:2: worker line has 4 fields, expected 5"},
      {"agent 1\n", "R:1: agent line has 2 fields, expected 3"},
      {"agent 1 2\nagent 3 4\n", "R:2: a second agent line"},
      {"agent 0 2\n", "R:1: bad pid '0'"},
      {"agent 1 2\nworker 0 0 -7 9\n", "R:2: bad pid '-7'"},
      {"agent 1 2\nworker x 0 7 9\n", "R:2: bad generation 'x'"},
      {"agent 1 2\nworker 0 -1 7 9\n", "R:2: bad rank '-1'"},
      {"agent 1 2x\n", "R:1: bad start time '2x'"},
      {"agent 1 2\n\n", "R:2: empty line"},
      {"agent 1 2\npid 3\n", "R:2: unknown line kind 'pid' (expected agent or worker)"},
      {"worker 0 0 7 9\n", "R: no agent line"},
      {"", "R: no agent line"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto r = ParseFenceRecord(c.text, "R");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.message);
  }
}

TEST_CASE("JudgeProcess: alive only as the recorded, unreaped process") {
  const RecordedProcess agent{4100, 500};
  CHECK(JudgeProcess(agent, Sighting{500, false}) == Fate::kAlive);
  CHECK(JudgeProcess(agent, std::nullopt) == Fate::kGone);          // the pid is free
  CHECK(JudgeProcess(agent, Sighting{500, true}) == Fate::kGone);   // a zombie holds nothing
  CHECK(JudgeProcess(agent, Sighting{900, false}) == Fate::kGone);  // recycled: never ours to signal
}

TEST_CASE("JudgeGroup: a group lives while its recorded leader or a member does, never through a recycled pid") {
  const RecordedProcess leader{4120, 700};
  CHECK(JudgeGroup(leader, Sighting{700, false}, 0) == Fate::kAlive);
  CHECK(JudgeGroup(leader, Sighting{700, false}, 3) == Fate::kAlive);
  // The leader died, a child it left in the group still runs (holding the GPU, say).
  CHECK(JudgeGroup(leader, std::nullopt, 1) == Fate::kAlive);
  CHECK(JudgeGroup(leader, Sighting{700, true}, 2) == Fate::kAlive);
  CHECK(JudgeGroup(leader, std::nullopt, 0) == Fate::kGone);
  CHECK(JudgeGroup(leader, Sighting{700, true}, 0) == Fate::kGone);
  // The pid runs another process: Linux reuses no pid while a group of that id has a member, so
  // the recorded group is empty and the members counted are the new process's.
  CHECK(JudgeGroup(leader, Sighting{800, false}, 2) == Fate::kGone);
}

}  // namespace
}  // namespace dslaunch::agent
