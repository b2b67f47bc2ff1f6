#include "launcher/start/ssh/relay_messages.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace dslaunch::launcher {
namespace {

using nlohmann::json;

std::string OneLine(std::string_view text) {
  std::string s(text);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::optional<int> ParseInt(std::string_view word) {
  int value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return value;
}

// Splits "WORD REST" at the first space; REST is empty when there is none.
std::pair<std::string_view, std::string_view> Head(std::string_view line) {
  size_t space = line.find(' ');
  if (space == std::string_view::npos) return {line, {}};
  return {line.substr(0, space), line.substr(space + 1)};
}

json PlanJson(const RelayPlan& p) {
  json nodes = json::array();
  for (const NodePlan& n : p.nodes) nodes.push_back({{"rank", n.node_rank}, {"host", n.host}, {"user", n.user}});
  return {{"ssh",
           {{"user", p.ssh.user},
            {"port", p.ssh.port},
            {"identities", p.ssh.identities},
            {"known_hosts", p.ssh.known_hosts},
            {"accept_new_host_keys", p.ssh.accept_new_host_keys},
            {"connect_timeout_ms", p.ssh.connect_timeout.count()},
            {"fanout", p.ssh.fanout}}},
          {"checks",
           {{"agent_path", p.checks.agent_path},
            {"agent_version", p.checks.agent_version},
            {"working_directory", p.checks.working_directory}}},
          {"self", p.self_rank},
          {"nodes", nodes}};
}

RelayPlan PlanFromJson(const json& j) {  // throws json::exception on a missing or mistyped field
  RelayPlan p;
  const json& ssh = j.at("ssh");
  p.ssh.user = ssh.at("user").get<std::string>();
  p.ssh.port = ssh.at("port").get<int>();
  p.ssh.identities = ssh.at("identities").get<std::vector<std::string>>();
  p.ssh.known_hosts = ssh.at("known_hosts").get<std::string>();
  p.ssh.accept_new_host_keys = ssh.at("accept_new_host_keys").get<bool>();
  p.ssh.connect_timeout = std::chrono::milliseconds(ssh.at("connect_timeout_ms").get<int64_t>());
  p.ssh.fanout = ssh.at("fanout").get<int>();
  const json& checks = j.at("checks");
  p.checks.agent_path = checks.at("agent_path").get<std::string>();
  p.checks.agent_version = checks.at("agent_version").get<std::string>();
  p.checks.working_directory = checks.at("working_directory").get<std::string>();
  p.self_rank = j.at("self").get<int>();
  for (const json& n : j.at("nodes")) {
    NodePlan node;
    node.node_rank = n.at("rank").get<int>();
    node.host = n.at("host").get<std::string>();
    node.user = n.at("user").get<std::string>();
    p.nodes.push_back(std::move(node));
  }
  return p;
}

AgentCommand CommandFromJson(const json& j) {
  AgentCommand c;
  c.node_rank = j.at("rank").get<int>();
  c.agent_path = j.at("agent_path").get<std::string>();
  c.endpoint_host = j.at("endpoint_host").get<std::string>();
  c.endpoint_port = j.at("endpoint_port").get<uint16_t>();
  c.job_id = j.at("job_id").get<std::string>();
  return c;
}

}  // namespace

std::string FormatPlanLine(const RelayPlan& plan) { return "plan " + PlanJson(plan).dump() + "\n"; }

Result<std::string> FormatSecretLine(std::string_view secret) {
  if (secret.find('\n') != std::string_view::npos) return InvalidArgumentError("the job secret holds a newline");
  return "secret " + std::string(secret) + "\n";
}

std::string FormatStartLine(const AgentCommand& c) {
  // Node mode (AgentCommand::join) never starts over SSH, so it does not travel.
  json j{{"rank", c.node_rank},
         {"agent_path", c.agent_path},
         {"endpoint_host", c.endpoint_host},
         {"endpoint_port", c.endpoint_port},
         {"job_id", c.job_id}};
  return "start " + j.dump() + "\n";
}

std::string FormatKillLine(int rank) { return "kill " + std::to_string(rank) + "\n"; }

Result<RelayCommand> ParseRelayCommand(std::string_view line) {
  auto [word, rest] = Head(line);
  RelayCommand c;
  try {
    if (word == "plan") {
      c.kind = RelayCommand::Kind::kPlan;
      c.plan = PlanFromJson(json::parse(rest));
    } else if (word == "secret") {
      c.kind = RelayCommand::Kind::kSecret;
      c.secret = std::string(rest);
      if (c.secret.empty()) return InvalidArgumentError("start relay: 'secret' without a secret");
    } else if (word == "start") {
      c.kind = RelayCommand::Kind::kStart;
      c.command = CommandFromJson(json::parse(rest));
    } else if (word == "kill") {
      c.kind = RelayCommand::Kind::kKill;
      std::optional<int> rank = ParseInt(rest);
      if (!rank) return InvalidArgumentError("start relay: 'kill' needs a node rank, got '" + std::string(rest) + "'");
      c.rank = *rank;
    } else {
      return InvalidArgumentError("start relay: unknown command '" + std::string(word) +
                                  "' (expected plan, secret, start or kill)");
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError("start relay: bad '" + std::string(word) + "' line: " + e.what());
  }
  return c;
}

std::string FormatFailReport(int rank, std::string_view reason) {
  return std::string(kRelayReportPrefix) + "fail " + std::to_string(rank) + " " + OneLine(reason) + "\n";
}

std::string FormatCheckedReport() { return std::string(kRelayReportPrefix) + "checked\n"; }

std::string FormatOutReport(int rank, std::string_view line) {
  return std::string(kRelayReportPrefix) + "out " + std::to_string(rank) + " " + OneLine(line) + "\n";
}

std::string FormatExitReport(int rank, const std::optional<ExitStatus>& status, std::string_view detail) {
  std::string s = "none";
  if (status) s = (status->kind == ExitStatus::Kind::kExited ? "code:" : "signal:") + std::to_string(status->value);
  return std::string(kRelayReportPrefix) + "exit " + std::to_string(rank) + " " + s + " " + OneLine(detail) + "\n";
}

std::optional<RelayReport> ParseRelayReport(std::string_view line) {
  if (!line.starts_with(kRelayReportPrefix)) return std::nullopt;
  auto [word, rest] = Head(line.substr(kRelayReportPrefix.size()));
  RelayReport r;
  if (word == "checked") {
    if (!rest.empty()) return std::nullopt;
    r.kind = RelayReport::Kind::kChecked;
    return r;
  }
  auto [rank_word, text] = Head(rest);
  std::optional<int> rank = ParseInt(rank_word);
  if (!rank) return std::nullopt;
  r.rank = *rank;
  if (word == "fail" || word == "out") {
    r.kind = word == "fail" ? RelayReport::Kind::kFail : RelayReport::Kind::kOut;
    r.text = std::string(text);
    return r;
  }
  if (word != "exit") return std::nullopt;
  r.kind = RelayReport::Kind::kExit;
  auto [status_word, detail] = Head(text);
  r.text = std::string(detail);
  if (status_word == "none") return r;
  size_t colon = status_word.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::optional<int> value = ParseInt(status_word.substr(colon + 1));
  if (!value) return std::nullopt;
  if (status_word.substr(0, colon) == "code") r.status = ExitStatus::Exited(*value);
  else if (status_word.substr(0, colon) == "signal") r.status = ExitStatus::Signaled(*value);
  else return std::nullopt;
  return r;
}

}  // namespace dslaunch::launcher
