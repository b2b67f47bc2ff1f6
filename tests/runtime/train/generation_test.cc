// The generation record of metrics.jsonl (runtime/train/generation.h): parsed from the restart
// environment, and written as one JSON object that a JSON parser reads back.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "runtime/train/generation.h"

namespace dslaunch::runtime {
namespace {

using Env = std::map<std::string, std::string>;

TEST_CASE("Generation 0 records its start without seconds lost") {
  auto info = ParseGenerationInfo(Env{}, 0);
  REQUIRE(info.ok());
  CHECK(GenerationRecordJson(*info, 4, 0, 1700000000000) ==
        R"({"event":"generation","generation":0,"world_size":4,"reason":"start","resumed_step":0})");
}

TEST_CASE("A restart records its reason, the step it resumed and the seconds since the fault") {
  auto info = ParseGenerationInfo(
      Env{{"DSLAUNCH_RESTART_REASON", "node 10.0.0.14 lost (no heartbeat for 3.0 s)"},
          {"DSLAUNCH_FAULT_TIME_MS", "1700000000000"}},
      2);
  REQUIRE(info.ok());
  const std::string json = GenerationRecordJson(*info, 3, 40, 1700000004250);
  CHECK(json == R"j({"event":"generation","generation":2,"world_size":3,)j"
                R"j("reason":"node 10.0.0.14 lost (no heartbeat for 3.0 s)","resumed_step":40,"seconds_lost":4.25})j");
  // Without a fault time there is nothing to subtract from.
  auto no_time = ParseGenerationInfo(Env{{"DSLAUNCH_RESTART_REASON", "worker exited"}}, 1);
  REQUIRE(no_time.ok());
  GenerationInfo timed = *no_time;
  timed.started_ms = 1;
  timed.rendezvous_ms = 3;
  CHECK(GenerationRecordJson(timed, 2, 8, 5) ==
        R"({"event":"generation","generation":1,"world_size":2,"reason":"worker exited","resumed_step":8,)"
        R"("started_ms":1,"rendezvous_ms":3,"first_step_ms":5})");
  CHECK(GenerationRecordJson(*no_time, 2, 8, 5) ==
        R"({"event":"generation","generation":1,"world_size":2,"reason":"worker exited","resumed_step":8})");
}

TEST_CASE("A reason with quotes, backslashes and control characters stays valid JSON") {
  GenerationInfo info;
  info.generation = 1;
  info.reason = "rank 3: \"boom\"\\ at\tstep\n4\x01";
  info.fault_time_ms = 1000;
  const auto parsed = nlohmann::json::parse(GenerationRecordJson(info, 1, 0, 1500));
  CHECK(parsed["reason"] == info.reason);
  CHECK(parsed["seconds_lost"] == 0.5);
}

TEST_CASE("A malformed DSLAUNCH_FAULT_TIME_MS names the variable") {
  for (const char* bad : {"soon", "-5", "12.5"}) {
    CAPTURE(bad);
    auto info = ParseGenerationInfo(Env{{"DSLAUNCH_FAULT_TIME_MS", bad}}, 1);
    REQUIRE_FALSE(info.ok());
    CHECK(info.status().message() == "DSLAUNCH_FAULT_TIME_MS='" + std::string(bad) +
                                         "' is not a Unix time in milliseconds (a non-negative integer)");
  }
}

}  // namespace
}  // namespace dslaunch::runtime
