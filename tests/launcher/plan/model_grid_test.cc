// A train.json job's process grid in the printed plan (docs/launch-plan.md, "Model parallelism"):
// the two sizes read from the file or its referenced DeepSpeed config, the grid over the plan's
// world, each rank's coordinates in both printed forms, and what is said instead when the sizes
// cannot be read or do not fit.
#include "launcher/plan/model_grid.h"

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "launcher/plan/plan_format.h"

namespace dslaunch::launcher {
namespace {

using nlohmann::json;

// Files by path; any other path is not found.
ReadText Files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": no such file");
    return it->second;
  };
}

// A plan of 8 ranks on two nodes of 4 running /cfg/train.json.
LaunchPlan EightRanks() {
  PlanOptions options;
  options.program = {ProgramKind::kTrainConfig, "/cfg/train.json", {}, true, "python3"};
  options.job_id = "j";
  Result<LaunchPlan> plan = PlanLaunch({{"", "a", {0, 1, 2, 3}}, {"", "b", {0, 1, 2, 3}}}, options);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  return *plan;
}

TEST_CASE("ReadModelGridSizes takes pipeline.stages and tensor_parallel.autotp_size, train.json's over its "
          "referenced config's") {
  auto none = ReadModelGridSizes("/cfg/train.json", Files({{"/cfg/train.json", R"({"model": {"type": "gpt"}})"}}));
  REQUIRE(none.ok());
  CHECK(none->pipeline_stages == 1);
  CHECK(none->tensor == 1);
  CHECK_FALSE(none->split());

  auto both = ReadModelGridSizes(
      "/cfg/train.json",
      Files({{"/cfg/train.json", R"({"pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 4}})"}}));
  REQUIRE(both.ok());
  CHECK(both->pipeline_stages == 2);
  CHECK(both->tensor == 4);

  // The referenced file gives what train.json leaves out; train.json's own key wins.
  auto merged = ReadModelGridSizes(
      "/cfg/train.json",
      Files({{"/cfg/train.json", R"({"deepspeed_config": "ds.json", "pipeline": {"stages": 4}})"},
             {"/cfg/ds.json", R"({"pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2}})"}}));
  REQUIRE_MESSAGE(merged.ok(), merged.status().ToString());
  CHECK(merged->pipeline_stages == 4);
  CHECK(merged->tensor == 2);

  // DeepSpeed's autotp_size 0 is off.
  auto off = ReadModelGridSizes("/cfg/train.json",
                                Files({{"/cfg/train.json", R"({"tensor_parallel": {"autotp_size": 0}})"}}));
  REQUIRE(off.ok());
  CHECK(off->tensor == 1);
}

TEST_CASE("ReadModelGridSizes names the file and key of what it cannot read") {
  CHECK(ReadModelGridSizes("/cfg/train.json", Files({})).status().message() == "/cfg/train.json: no such file");
  CHECK(ReadModelGridSizes("/cfg/train.json", Files({{"/cfg/train.json", "[1, 2"}})).status().message() ==
        "/cfg/train.json: not a JSON object (the model-parallel sizes are read from it for the plan)");
  CHECK(ReadModelGridSizes("/cfg/train.json", Files({{"/cfg/train.json", R"({"pipeline": {"stages": "auto"}})"}}))
            .status()
            .message() == "/cfg/train.json: $.pipeline.stages: expected an integer >= 1, got \"auto\"");
  CHECK(ReadModelGridSizes("/cfg/train.json",
                           Files({{"/cfg/train.json", R"({"tensor_parallel": {"autotp_size": -2}})"}}))
            .status()
            .message() == "/cfg/train.json: $.tensor_parallel.autotp_size: expected an integer >= 0, got -2");
  CHECK(ReadModelGridSizes("/cfg/train.json", Files({{"/cfg/train.json", R"({"deepspeed_config": "gone.json"})"}}))
            .status()
            .message() == "/cfg/gone.json: no such file");
}

TEST_CASE("The printed plan gives each rank its stage, data and tensor coordinates") {
  LaunchPlan plan = EightRanks();
  SetModelGrid(plan, ModelGridSizes{2, 2});
  REQUIRE(plan.grid.has_value());
  CHECK(plan.grid_error.empty());

  const json doc = json::parse(FormatPlanJson(plan));
  CHECK(doc.at("grid") == json{{"pipeline", 2}, {"data", 2}, {"tensor", 2}});
  // Rank 5 (node b, local 1): stage 1, data 0, tensor 1 (docs/parallelism.md's worked table).
  const json& rank5 = doc.at("nodes").at(1).at("workers").at(1);
  CHECK(rank5.at("rank") == 5);
  CHECK(rank5.at("grid") == json{{"stage", 1}, {"data", 0}, {"tensor", 1}});
  CHECK(doc.at("nodes").at(0).at("workers").at(2).at("grid") == json{{"stage", 0}, {"data", 1}, {"tensor", 0}});
  CHECK_FALSE(doc.contains("grid_error"));

  const std::string table = FormatPlanTable(plan);
  CHECK(table.find("grid 2 stages x 2 data x 2 tensor (train.json's pipeline and tensor_parallel)\n") !=
        std::string::npos);
  CHECK(table.find("node  host  slots  rank  local  stage/data/tensor  argv\n") != std::string::npos);
  CHECK(table.find("\n1     b     0-3    4     0      1/0/0              dslaunch-worker train /cfg/train.json\n") !=
        std::string::npos);
  CHECK(table.find("\n                   5     1      1/0/1              dslaunch-worker train /cfg/train.json\n") !=
        std::string::npos);
}

TEST_CASE("A grid that does not fit the world, or sizes that cannot be read, are said instead of coordinates") {
  LaunchPlan plan = EightRanks();
  SetModelGrid(plan, ModelGridSizes{3, 1});
  CHECK_FALSE(plan.grid.has_value());
  CHECK(plan.grid_error ==
        "pipeline.stages 3 x tensor_parallel.autotp_size 1 = 3 ranks per model copy does not divide the 8 ranks of the "
        "job: give the job a multiple of 3 ranks, or change the two sizes");
  CHECK(json::parse(FormatPlanJson(plan)).at("grid_error") == plan.grid_error);
  CHECK(FormatPlanTable(plan).find("grid: none: pipeline.stages 3 x") != std::string::npos);
  CHECK(FormatPlanTable(plan).find("stage/data/tensor") == std::string::npos);

  SetModelGrid(plan, Result<ModelGridSizes>(NotFoundError("/cfg/train.json: no such file")));
  CHECK(plan.grid_error == "/cfg/train.json: no such file");

  // Sizes that split nothing: no grid and nothing to say, as for any other program.
  SetModelGrid(plan, ModelGridSizes{1, 1});
  CHECK_FALSE(plan.grid.has_value());
  CHECK(plan.grid_error.empty());
  CHECK_FALSE(json::parse(FormatPlanJson(plan)).contains("grid"));
}

}  // namespace
}  // namespace dslaunch::launcher
