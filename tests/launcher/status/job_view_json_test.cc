#include "launcher/status/job_view_json.h"

#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tests/launcher/status/sample_view.h"

namespace dslaunch::launcher {
namespace {

using nlohmann::json;

TEST_CASE("JobViewJson writes every field, null for figures never reported") {
  const JobView v = testing::SampleView();
  const std::string text = JobViewJson(v);
  CHECK(text.find('\n') == std::string::npos);  // one SSE data line
  const json j = json::parse(text);
  CHECK(j["job_id"] == v.job_id);
  CHECK(j["uptime_ms"] == 95500);
  CHECK(j["exit_code"].is_null());
  CHECK(j["ranks"].size() == 4);
  CHECK(j["ranks"][1]["state"] == "failed");
  CHECK(j["ranks"][1]["exit_code"] == 1);
  CHECK(j["ranks"][2]["loss"].is_null());
  CHECK(j["ranks"][2]["last_step"] == -1);
  CHECK(j["ranks"][3]["straggler"] == true);
  CHECK(j["nodes"][1]["host"] == "node \"b\"\\x");
  CHECK(j["loss"].size() == 40);
  CHECK(j["loss"][0] == json::array({1, 2.98}));
  CHECK(j["val_loss"].size() == 4);
  CHECK(j["checkpoint_save_bytes"] == 123456789);
  CHECK(j["outcome"].is_null());  // still running
  CHECK(j["ended_ms"].is_null());
  CHECK(j["duration_ms"].is_null());
  CHECK(j["ranks"][3]["straggler_detail"] ==
        json({{"median_ms", 380.0}, {"peers_median_ms", 150.0}, {"since_step", 38}, {"since_ms", v.started_ms + 90000}}));
  CHECK(j["ranks"][0]["straggler_detail"].is_null());
  CHECK(j["straggler_rule"] == json({{"factor", 1.5}, {"margin_ms", 20.0}, {"window", 20}, {"patience", 5}}));
}

TEST_CASE("JobViewJson of a finished job says its outcome, exit code, end and duration") {
  JobView v = testing::SampleView();
  v.state = "finished";
  v.exit_code = 0;
  v.outcome = "succeeded";
  v.ended_ms = v.started_ms + 63250;
  v.straggler_factor = 0;  // the rule off: no rule
  const json j = json::parse(JobViewJson(v));
  CHECK(j["state"] == "finished");
  CHECK(j["outcome"] == "succeeded");
  CHECK(j["exit_code"] == 0);
  CHECK(j["ended_ms"] == v.started_ms + 63250);
  CHECK(j["duration_ms"] == 63250);
  CHECK(j["straggler_rule"].is_null());
  auto back = ParseJobViewJson(j.dump());
  REQUIRE(back.ok());
  CHECK(back->outcome == "succeeded");
  CHECK(back->ended_ms == v.started_ms + 63250);
}

TEST_CASE("JobViewJson writes a NaN loss as null") {
  JobView v = testing::SampleView();
  v.ranks[0].loss = NAN;
  v.loss.push_back({41, NAN});
  const json j = json::parse(JobViewJson(v));
  CHECK(j["ranks"][0]["loss"].is_null());
  CHECK(j["loss"][40][1].is_null());
}

TEST_CASE("ParseJobViewJson reads back what JobViewJson wrote") {
  const JobView v = testing::SampleView();
  auto back = ParseJobViewJson(JobViewJson(v));
  REQUIRE(back.ok());
  CHECK(JobViewJson(*back) == JobViewJson(v));
  CHECK(back->ranks[3].step_ms == 412);
  CHECK(back->ranks[3].compute_ms == 380);
  CHECK(!back->ranks[2].loss.has_value());
  CHECK(back->ranks[3].straggler_since_step == 38);
  CHECK(back->straggler_patience == 5);
  CHECK(!back->grid.has_value());
  CHECK(!back->ranks[0].grid.has_value());
}

TEST_CASE("The grid of a split model and each rank's place in it, as --dry-run=json writes them, and back") {
  JobView v = testing::SampleView();
  CHECK(json::parse(JobViewJson(v))["grid"].is_null());
  CHECK(json::parse(JobViewJson(v))["ranks"][0]["grid"].is_null());
  const ProcessGrid grid = *ProcessGrid::Create(4, 2, 2);
  v.grid = grid.shape();
  for (RankView& r : v.ranks) r.grid = grid.CoordinatesOf(r.rank);
  const json j = json::parse(JobViewJson(v));
  CHECK(j["grid"] == json({{"pipeline", 2}, {"data", 1}, {"tensor", 2}}));
  CHECK(j["ranks"][3]["grid"] == json({{"stage", 1}, {"data", 0}, {"tensor", 1}}));
  CHECK(j["ranks"][2]["grid"] == json({{"stage", 1}, {"data", 0}, {"tensor", 0}}));
  auto back = ParseJobViewJson(JobViewJson(v));
  REQUIRE(back.ok());
  CHECK(JobViewJson(*back) == JobViewJson(v));
  CHECK(back->grid == v.grid);
  CHECK(back->ranks[3].grid == v.ranks[3].grid);
  json bad = j;
  bad["ranks"][1]["grid"]["tensor"] = "one";
  auto refused = ParseJobViewJson(bad.dump());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "ranks[1].grid.tensor: expected an integer");
}

TEST_CASE("ParseJobViewJson names the JSON path of a bad field") {
  json j = json::parse(JobViewJson(testing::SampleView()));
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"rank state not a string", [](json& x) { x["ranks"][1]["state"] = 3; }, "ranks[1].state: expected a string"},
      {"missing generation", [](json& x) { x.erase("generation"); }, "generation: expected an integer"},
      {"bad point", [](json& x) { x["loss"][2] = json::array({1}); }, "loss[2]: expected [step, value]"},
      {"command item", [](json& x) { x["command"][0] = 1; }, "command[0]: expected a string"},
      {"node host", [](json& x) { x["nodes"][0].erase("host"); }, "nodes[0].host: expected a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    json edited = j;
    c.edit(edited);
    auto parsed = ParseJobViewJson(edited.dump());
    REQUIRE(!parsed.ok());
    CHECK(parsed.status().message() == c.message);
  }
  CHECK(ParseJobViewJson("{").status().message() == "not JSON");
}

}  // namespace
}  // namespace dslaunch::launcher
