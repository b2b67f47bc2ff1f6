#include "launcher/status/job_view_json.h"

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

namespace dslaunch::launcher {
namespace {

using nlohmann::json;

json Number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

template <typename T>
json Optional(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) return Number(*v);
  return *v;
}

json Series(const std::vector<SeriesPoint>& points) {
  json a = json::array();
  for (const SeriesPoint& p : points) a.push_back(json::array({p.step, Number(p.value)}));
  return a;
}

// Why and since when a flagged rank is a straggler; null while it is not.
json StragglerDetail(const RankView& r) {
  if (!r.straggler) return nullptr;
  return {{"median_ms", Optional(r.straggler_median_ms)},
          {"peers_median_ms", Optional(r.straggler_peers_median_ms)},
          {"since_step", r.straggler_since_step},
          {"since_ms", r.straggler_since_ms}};
}

json StragglerRule(const JobView& v) {
  if (v.straggler_factor <= 0) return nullptr;
  return {{"factor", v.straggler_factor},
          {"margin_ms", v.straggler_margin_ms},
          {"window", v.straggler_window},
          {"patience", v.straggler_patience}};
}

// A rank's place in the grid, and the grid, as --dry-run=json writes them; null without one.
json GridJson(const std::optional<GridCoordinates>& at) {
  if (!at) return nullptr;
  return {{"stage", at->pipeline}, {"data", at->data}, {"tensor", at->tensor}};
}
json GridJson(const std::optional<GridShape>& shape) {
  if (!shape) return nullptr;
  return {{"pipeline", shape->pipeline}, {"data", shape->data}, {"tensor", shape->tensor}};
}

json RankJson(const RankView& r) {
  return {{"rank", r.rank},
          {"local_rank", r.local_rank},
          {"node_rank", r.node_rank},
          {"host", r.host},
          {"pid", r.pid},
          {"state", r.state},
          {"exit_code", Optional(r.exit_code)},
          {"exit_text", r.exit_text},
          {"log_path", r.log_path},
          {"grid", GridJson(r.grid)},
          {"last_step", r.last_step},
          {"step_ms", Optional(r.step_ms)},
          {"compute_ms", Optional(r.compute_ms)},
          {"loss", Optional(r.loss)},
          {"tokens_per_s", Optional(r.tokens_per_s)},
          {"last_report_ms", r.last_report_ms},
          {"straggler", r.straggler},
          {"straggler_detail", StragglerDetail(r)}};
}

json NodeJson(const NodeView& n) {
  return {{"node_rank", n.node_rank},
          {"host", n.host},
          {"last_heartbeat_ms", n.last_heartbeat_ms},
          {"connected", n.connected}};
}

// Reading: each helper names the JSON path of what it reads in its error.
Status TypeError(const std::string& path, const char* expected) {
  return InvalidArgumentError(path + ": expected " + expected);
}

const json* Field(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Status Read(const json& obj, const std::string& path, const std::string& key, std::string& out) {
  const json* v = Field(obj, key);
  if (v == nullptr || !v->is_string()) return TypeError(path + key, "a string");
  out = v->get<std::string>();
  return Status::Ok();
}

Status Read(const json& obj, const std::string& path, const std::string& key, bool& out) {
  const json* v = Field(obj, key);
  if (v == nullptr || !v->is_boolean()) return TypeError(path + key, "true or false");
  out = v->get<bool>();
  return Status::Ok();
}

template <typename T>
Status Read(const json& obj, const std::string& path, const std::string& key, T& out) {
  const json* v = Field(obj, key);
  if constexpr (std::is_integral_v<T>) {
    if (v == nullptr || !v->is_number_integer()) return TypeError(path + key, "an integer");
  } else {
    if (v == nullptr || !v->is_number()) return TypeError(path + key, "a number");
  }
  out = v->get<T>();
  return Status::Ok();
}

template <typename T>
Status Read(const json& obj, const std::string& path, const std::string& key, std::optional<T>& out) {
  const json* v = Field(obj, key);
  if (v != nullptr && v->is_null()) {
    out.reset();
    return Status::Ok();
  }
  T value{};
  DSLAUNCH_RETURN_IF_ERROR(Read(obj, path, key, value));
  out = value;
  return Status::Ok();
}

Result<std::vector<SeriesPoint>> ReadSeries(const json& obj, const std::string& key) {
  const json* v = Field(obj, key);
  if (v == nullptr || !v->is_array()) return TypeError(key, "an array of [step, value]");
  std::vector<SeriesPoint> points;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& p = (*v)[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !(p[1].is_number() || p[1].is_null())) {
      return TypeError(key + "[" + std::to_string(i) + "]", "[step, value]");
    }
    points.push_back({p[0].get<int64_t>(), p[1].is_null() ? NAN : p[1].get<double>()});
  }
  return points;
}

// A grid object's three sizes or coordinates, under `names`; absent or null: none (a launcher
// older than them, or a job without a grid).
Result<std::optional<std::array<int, 3>>> ReadGrid(const json& obj, const std::string& path,
                                                   const std::array<const char*, 3>& names) {
  const json* g = Field(obj, "grid");
  if (g == nullptr || g->is_null()) return std::optional<std::array<int, 3>>();
  if (!g->is_object()) return TypeError(path + "grid", "an object or null");
  std::array<int, 3> values{};
  for (size_t i = 0; i < 3; ++i) DSLAUNCH_RETURN_IF_ERROR(Read(*g, path + "grid.", names[i], values[i]));
  return std::optional<std::array<int, 3>>(values);
}

Result<RankView> ReadRank(const json& r, const std::string& path) {
  if (!r.is_object()) return TypeError(path, "an object");
  RankView v;
  const std::string p = path + ".";
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "rank", v.rank));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "local_rank", v.local_rank));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "node_rank", v.node_rank));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "host", v.host));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "pid", v.pid));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "state", v.state));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "exit_code", v.exit_code));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "exit_text", v.exit_text));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "log_path", v.log_path));
  DSLAUNCH_ASSIGN_OR_RETURN(const auto grid, ReadGrid(r, p, {"stage", "data", "tensor"}));
  if (grid) v.grid = GridCoordinates{(*grid)[0], (*grid)[1], (*grid)[2]};
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "last_step", v.last_step));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "step_ms", v.step_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "compute_ms", v.compute_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "loss", v.loss));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "tokens_per_s", v.tokens_per_s));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "last_report_ms", v.last_report_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(r, p, "straggler", v.straggler));
  if (const json* d = Field(r, "straggler_detail"); d != nullptr && !d->is_null()) {
    if (!d->is_object()) return TypeError(p + "straggler_detail", "an object or null");
    const std::string dp = p + "straggler_detail.";
    DSLAUNCH_RETURN_IF_ERROR(Read(*d, dp, "median_ms", v.straggler_median_ms));
    DSLAUNCH_RETURN_IF_ERROR(Read(*d, dp, "peers_median_ms", v.straggler_peers_median_ms));
    DSLAUNCH_RETURN_IF_ERROR(Read(*d, dp, "since_step", v.straggler_since_step));
    DSLAUNCH_RETURN_IF_ERROR(Read(*d, dp, "since_ms", v.straggler_since_ms));
  }
  return v;
}

Result<NodeView> ReadNode(const json& n, const std::string& path) {
  if (!n.is_object()) return TypeError(path, "an object");
  NodeView v;
  const std::string p = path + ".";
  DSLAUNCH_RETURN_IF_ERROR(Read(n, p, "node_rank", v.node_rank));
  DSLAUNCH_RETURN_IF_ERROR(Read(n, p, "host", v.host));
  DSLAUNCH_RETURN_IF_ERROR(Read(n, p, "last_heartbeat_ms", v.last_heartbeat_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(n, p, "connected", v.connected));
  return v;
}

Status ReadLists(const json& j, JobView& v) {
  const json* command = Field(j, "command");
  if (command == nullptr || !command->is_array()) return TypeError("command", "an array of strings");
  for (size_t i = 0; i < command->size(); ++i) {
    if (!(*command)[i].is_string()) return TypeError("command[" + std::to_string(i) + "]", "a string");
    v.command.push_back((*command)[i].get<std::string>());
  }
  for (const char* key : {"nodes", "ranks"}) {
    const json* a = Field(j, key);
    if (a == nullptr || !a->is_array()) return TypeError(key, "an array");
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string path = std::string(key) + "[" + std::to_string(i) + "]";
      if (std::string(key) == "nodes") {
        DSLAUNCH_ASSIGN_OR_RETURN(NodeView n, ReadNode((*a)[i], path));
        v.nodes.push_back(std::move(n));
      } else {
        DSLAUNCH_ASSIGN_OR_RETURN(RankView r, ReadRank((*a)[i], path));
        v.ranks.push_back(std::move(r));
      }
    }
  }
  DSLAUNCH_ASSIGN_OR_RETURN(const auto grid, ReadGrid(j, "", {"pipeline", "data", "tensor"}));
  if (grid) v.grid = GridShape{(*grid)[0], (*grid)[1], (*grid)[2]};
  DSLAUNCH_ASSIGN_OR_RETURN(v.loss, ReadSeries(j, "loss"));
  DSLAUNCH_ASSIGN_OR_RETURN(v.val_loss, ReadSeries(j, "val_loss"));
  DSLAUNCH_ASSIGN_OR_RETURN(v.tokens_per_s, ReadSeries(j, "tokens_per_s"));
  return Status::Ok();
}

}  // namespace

std::string JobViewJson(const JobView& view) {
  json ranks = json::array();
  for (const RankView& r : view.ranks) ranks.push_back(RankJson(r));
  json nodes = json::array();
  for (const NodeView& n : view.nodes) nodes.push_back(NodeJson(n));
  json j = {{"job_id", view.job_id},
            {"command", view.command},
            {"state", view.state},
            {"generation", view.generation},
            {"restarts", view.restarts},
            {"started_ms", view.started_ms},
            {"now_ms", view.now_ms},
            {"uptime_ms", view.started_ms > 0 ? view.now_ms - view.started_ms : 0},
            {"exit_code", Optional(view.exit_code)},
            {"outcome", view.outcome.empty() ? json(nullptr) : json(view.outcome)},
            {"ended_ms", view.ended_ms > 0 ? json(view.ended_ms) : json(nullptr)},
            {"duration_ms", view.ended_ms > 0 ? json(view.ended_ms - view.started_ms) : json(nullptr)},
            {"root_cause", view.root_cause},
            {"nodes", std::move(nodes)},
            {"ranks", std::move(ranks)},
            {"grid", GridJson(view.grid)},
            {"loss", Series(view.loss)},
            {"val_loss", Series(view.val_loss)},
            {"tokens_per_s", Series(view.tokens_per_s)},
            {"straggler_rule", StragglerRule(view)},
            {"stragglers_total", view.stragglers_total},
            {"checkpoint_saves_total", view.checkpoint_saves_total},
            {"checkpoint_save_seconds", Optional(view.checkpoint_save_seconds)},
            {"checkpoint_save_bytes", Optional(view.checkpoint_save_bytes)},
            {"store_bytes_sent_total", view.store_bytes_sent_total}};
  // Replace, not throw, on invalid UTF-8 in a host name or a command argument.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<JobView> ParseJobViewJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("not JSON");
  if (!j.is_object()) return TypeError("(top level)", "an object");
  JobView v;
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "job_id", v.job_id));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "state", v.state));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "generation", v.generation));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "restarts", v.restarts));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "started_ms", v.started_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "now_ms", v.now_ms));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "exit_code", v.exit_code));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "root_cause", v.root_cause));
  // Absent or null before the job finished (and from a launcher older than them).
  std::optional<std::string> outcome;
  std::optional<int64_t> ended_ms;
  if (Field(j, "outcome") != nullptr) DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "outcome", outcome));
  if (Field(j, "ended_ms") != nullptr) DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "ended_ms", ended_ms));
  v.outcome = outcome.value_or("");
  v.ended_ms = ended_ms.value_or(0);
  if (const json* rule = Field(j, "straggler_rule"); rule != nullptr && !rule->is_null()) {
    if (!rule->is_object()) return TypeError("straggler_rule", "an object or null");
    DSLAUNCH_RETURN_IF_ERROR(Read(*rule, "straggler_rule.", "factor", v.straggler_factor));
    DSLAUNCH_RETURN_IF_ERROR(Read(*rule, "straggler_rule.", "margin_ms", v.straggler_margin_ms));
    DSLAUNCH_RETURN_IF_ERROR(Read(*rule, "straggler_rule.", "window", v.straggler_window));
    DSLAUNCH_RETURN_IF_ERROR(Read(*rule, "straggler_rule.", "patience", v.straggler_patience));
  }
  DSLAUNCH_RETURN_IF_ERROR(ReadLists(j, v));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "stragglers_total", v.stragglers_total));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "checkpoint_saves_total", v.checkpoint_saves_total));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "checkpoint_save_seconds", v.checkpoint_save_seconds));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "checkpoint_save_bytes", v.checkpoint_save_bytes));
  DSLAUNCH_RETURN_IF_ERROR(Read(j, "", "store_bytes_sent_total", v.store_bytes_sent_total));
  return v;
}

}  // namespace dslaunch::launcher
