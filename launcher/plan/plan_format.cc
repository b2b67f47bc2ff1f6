#include "launcher/plan/plan_format.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "common/cpu_list.h"
#include "launcher/plan/env_contract.h"
#include "launcher/plan/exported_env.h"
#include "launcher/plan/shell_quote.h"

namespace dslaunch::launcher {
namespace {

using Row = std::vector<std::string>;

// Left-aligned columns separated by two spaces; the last column is not padded. Every row has the
// first row's number of cells.
std::string RenderTable(const std::vector<Row>& rows) {
  const std::size_t columns = rows.front().size();
  std::vector<std::size_t> width(columns);
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < columns; ++c) {
      if (row[c].size() <= kMaxPaddedCellWidth) width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < columns; ++c) {
      line += row[c];
      if (c + 1 < columns) line += std::string(width[c] - std::min(width[c], row[c].size()) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// "env NAME=VALUE" lines for the variables every worker gets besides the contract (the exports),
// taken from the first node: PlanLaunch gives every node the same ones. Secret values redacted.
std::string ExportLines(const LaunchPlan& plan) {
  if (plan.nodes.empty()) return "";
  std::string out;
  for (const auto& [name, value] : plan.nodes.front().env) {
    if (IsContractVariable(name)) continue;
    out += "env ";
    out += LooksSecret(name) ? name + "=" + kRedacted : ShellQuote(name + "=" + RedactValue(name, value));
    out += '\n';
  }
  return out;
}

// "1/0/1"-like cells of the grid: stage/data/tensor.
std::string GridCell(const ProcessGrid& grid, int rank) {
  const GridCoordinates at = grid.CoordinatesOf(rank);
  return std::to_string(at.pipeline) + "/" + std::to_string(at.data) + "/" + std::to_string(at.tensor);
}

}  // namespace

std::string SlotRanges(const std::vector<int>& slots) {
  std::string out;
  for (std::size_t i = 0; i < slots.size();) {
    std::size_t j = i;
    while (j + 1 < slots.size() && slots[j + 1] == slots[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(slots[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(slots[j]);
    i = j + 1;
  }
  return out;
}

std::string FormatPlanTable(const LaunchPlan& plan) {
  std::string out;
  out += "job " + OrDash(plan.job_id) + "  generation " + std::to_string(plan.generation) +
         "  world size " + std::to_string(plan.world_size) + "  nodes " +
         std::to_string(plan.nodes.size()) + "\n";
  out += "master " + OrDash(plan.master_addr) + ":" + std::to_string(plan.master_port) +
         "  store " + OrDash(plan.store_address) + "\n";
  if (plan.bind_cores_to_rank) {
    out += "bind cores to rank: " +
           (plan.bind_core_list.empty() ? std::string("each node's CPU affinity") : FormatCpuList(plan.bind_core_list)) +
           "\n";
  }
  if (plan.grid) out += "grid " + DescribeGridShape(plan.grid->shape()) + " (train.json's pipeline and tensor_parallel)\n";
  if (!plan.grid_error.empty()) out += "grid: none: " + plan.grid_error + "\n";
  out += ExportLines(plan);

  // With a grid, a column of each rank's stage/data/tensor coordinates before argv.
  auto row = [&](Row cells, const std::string& grid_cell, std::string argv) {
    if (plan.grid) cells.push_back(grid_cell);
    cells.push_back(std::move(argv));
    return cells;
  };
  std::vector<Row> rows;
  rows.push_back(row({"node", "host", "slots", "rank", "local"}, "stage/data/tensor", "argv"));
  for (const NodePlan& node : plan.nodes) {
    std::string host = node.user.empty() ? node.host : node.user + "@" + node.host;
    bool first = true;
    for (const WorkerPlan& worker : node.workers) {
      rows.push_back(row({first ? std::to_string(node.node_rank) : "", first ? host : "",
                          first ? SlotRanges(node.slots) : "", std::to_string(worker.rank),
                          std::to_string(worker.local_rank)},
                         plan.grid ? GridCell(*plan.grid, worker.rank) : "", ShellJoin(worker.argv)));
      first = false;
    }
    if (node.workers.empty()) {
      rows.push_back(row({std::to_string(node.node_rank), host, SlotRanges(node.slots), "-", "-"}, "-", "-"));
    }
  }
  out += RenderTable(rows);
  return out;
}

std::string FormatPlanJson(const LaunchPlan& plan) {
  using nlohmann::json;
  json nodes = json::array();
  for (const NodePlan& node : plan.nodes) {
    json workers = json::array();
    for (const WorkerPlan& worker : node.workers) {
      json entry{{"rank", worker.rank},
                 {"local_rank", worker.local_rank},
                 {"argv", worker.argv},
                 {"env", RedactEnvironment(WorkerOwnEnvironment(worker))}};
      if (plan.grid) {
        const GridCoordinates at = plan.grid->CoordinatesOf(worker.rank);
        entry["grid"] = json{{"stage", at.pipeline}, {"data", at.data}, {"tensor", at.tensor}};
      }
      workers.push_back(std::move(entry));
    }
    nodes.push_back(json{{"node_rank", node.node_rank},
                         {"user", node.user},
                         {"host", node.host},
                         {"slots", node.slots},
                         {"env", RedactEnvironment(node.env)},
                         {"workers", std::move(workers)}});
  }
  json doc{{"version", kPlanJsonVersion},
           {"job_id", plan.job_id},
           {"generation", plan.generation},
           {"world_size", plan.world_size},
           {"master_addr", plan.master_addr},
           {"master_port", plan.master_port},
           {"store_address", plan.store_address},
           {"bind_cores_to_rank", plan.bind_cores_to_rank},
           {"bind_core_list", FormatCpuList(plan.bind_core_list)},
           {"nodes", std::move(nodes)}};
  if (plan.grid) {
    const GridShape& s = plan.grid->shape();
    doc["grid"] = json{{"pipeline", s.pipeline}, {"data", s.data}, {"tensor", s.tensor}};
  }
  if (!plan.grid_error.empty()) doc["grid_error"] = plan.grid_error;
  // Invalid UTF-8 in an argument or variable is replaced (U+FFFD) instead of throwing: dump()
  // would otherwise raise type_error.316, and a dry run must always print.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace dslaunch::launcher
