#include "launcher/plan/model_grid.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

namespace dslaunch::launcher {
namespace {

using Json = nlohmann::json;

Result<Json> ParseObject(const std::string& text, const std::string& path) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return InvalidArgumentError(path + ": not a JSON object (the model-parallel sizes are read from it for the plan)");
  }
  return doc;
}

// doc[section][key] as an integer >= min, or nullopt where absent.
Result<std::optional<int>> SizeAt(const Json& doc, const char* section, const char* key, int min,
                                  const std::string& path) {
  auto s = doc.find(section);
  if (s == doc.end() || !s->is_object()) return std::optional<int>();
  auto k = s->find(key);
  if (k == s->end()) return std::optional<int>();
  if (!k->is_number_integer() || k->get<int64_t>() < min || k->get<int64_t>() > (1 << 20)) {
    return InvalidArgumentError(path + ": $." + section + "." + key + ": expected an integer >= " +
                                std::to_string(min) + ", got " + k->dump());
  }
  return std::optional<int>(k->get<int>());
}

// Fills the sizes `doc` holds that are still unset.
Status TakeSizes(const Json& doc, const std::string& path, std::optional<int>* stages, std::optional<int>* tensor) {
  if (!stages->has_value()) {
    DSLAUNCH_ASSIGN_OR_RETURN(*stages, SizeAt(doc, "pipeline", "stages", 1, path));
  }
  if (!tensor->has_value()) {
    DSLAUNCH_ASSIGN_OR_RETURN(*tensor, SizeAt(doc, "tensor_parallel", "autotp_size", 0, path));
  }
  return Status::Ok();
}

}  // namespace

Result<ModelGridSizes> ReadModelGridSizes(const std::string& path, const ReadText& read) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, read(path));
  DSLAUNCH_ASSIGN_OR_RETURN(Json doc, ParseObject(text, path));
  std::optional<int> stages, tensor;
  DSLAUNCH_RETURN_IF_ERROR(TakeSizes(doc, path, &stages, &tensor));
  if (auto ref = doc.find("deepspeed_config"); ref != doc.end() && ref->is_string() && !ref->get<std::string>().empty()) {
    std::filesystem::path referenced(ref->get<std::string>());
    if (referenced.is_relative()) referenced = std::filesystem::path(path).parent_path() / referenced;
    DSLAUNCH_ASSIGN_OR_RETURN(std::string ds_text, read(referenced.string()));
    DSLAUNCH_ASSIGN_OR_RETURN(Json ds, ParseObject(ds_text, referenced.string()));
    DSLAUNCH_RETURN_IF_ERROR(TakeSizes(ds, referenced.string(), &stages, &tensor));
  }
  return ModelGridSizes{stages.value_or(1), std::max(tensor.value_or(1), 1)};
}

void SetModelGrid(LaunchPlan& plan, const Result<ModelGridSizes>& sizes) {
  plan.grid.reset();
  plan.grid_error.clear();
  if (!sizes.ok()) {
    plan.grid_error = sizes.status().message();
    return;
  }
  if (!sizes->split()) return;
  auto grid = ProcessGrid::Create(plan.world_size, sizes->pipeline_stages, sizes->tensor);
  if (!grid.ok()) {
    plan.grid_error = grid.status().message();
    return;
  }
  plan.grid = *grid;
}

}  // namespace dslaunch::launcher
