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

constexpr std::size_t kColumns = 6;
using Row = std::array<std::string, kColumns>;

// Left-aligned columns separated by two spaces; the last column is not padded.
std::string RenderTable(const std::vector<Row>& rows) {
  std::array<std::size_t, kColumns> width{};
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < kColumns; ++c) {
      if (row[c].size() <= kMaxPaddedCellWidth) width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < kColumns; ++c) {
      line += row[c];
      if (c + 1 < kColumns) line += std::string(width[c] - std::min(width[c], row[c].size()) + 2, ' ');
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
  out += ExportLines(plan);

  std::vector<Row> rows;
  rows.push_back({"node", "host", "slots", "rank", "local", "argv"});
  for (const NodePlan& node : plan.nodes) {
    std::string host = node.user.empty() ? node.host : node.user + "@" + node.host;
    bool first = true;
    for (const WorkerPlan& worker : node.workers) {
      rows.push_back({first ? std::to_string(node.node_rank) : "", first ? host : "",
                      first ? SlotRanges(node.slots) : "", std::to_string(worker.rank),
                      std::to_string(worker.local_rank), ShellJoin(worker.argv)});
      first = false;
    }
    if (node.workers.empty()) {
      rows.push_back({std::to_string(node.node_rank), host, SlotRanges(node.slots), "-", "-", "-"});
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
      workers.push_back(json{{"rank", worker.rank},
                             {"local_rank", worker.local_rank},
                             {"argv", worker.argv},
                             {"env", RedactEnvironment(WorkerOwnEnvironment(worker))}});
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
  // Invalid UTF-8 in an argument or variable is replaced (U+FFFD) instead of throwing: dump()
  // would otherwise raise type_error.316, and a dry run must always print.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace dslaunch::launcher
