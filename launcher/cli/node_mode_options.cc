#include "launcher/cli/node_mode_options.h"

#include <cctype>
#include <charconv>
#include <string_view>

#include "common/job_id.h"

namespace dslaunch::launcher {

Status ParseNproc(const std::string& text, CliOptions& o) {
  if (text == "auto") {
    o.nproc_keyword = NprocKeyword::kAuto;
  } else if (text == "gpu") {
    o.nproc_keyword = NprocKeyword::kGpu;
  } else if (text == "cpu") {
    o.nproc_keyword = NprocKeyword::kCpu;
  } else {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return InvalidArgumentError("--nproc_per_node '" + text +
                                  "': expected a number of workers per node, or auto, gpu or cpu");
    }
    o.num_gpus = value;
  }
  return Status::Ok();
}

Status ParseEndpoint(const std::string& text, int default_port, RendezvousOptions& r) {
  const std::string bad = "--rdzv_endpoint '" + text + "': expected HOST[:PORT] (IPv6 in brackets: [ADDR]:PORT)";
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return InvalidArgumentError(bad);
    r.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return InvalidArgumentError(bad);
      port = text.substr(close + 2);
      if (port.empty()) return InvalidArgumentError(bad);
    }
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string::npos && text.find(':', colon + 1) != std::string::npos) return InvalidArgumentError(bad);
    r.host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return InvalidArgumentError(bad);
    }
  }
  if (r.host.empty()) return InvalidArgumentError(bad);
  r.port = default_port;
  if (!port.empty()) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), r.port);
    if (ec != std::errc() || end != port.data() + port.size() || r.port < 0 || r.port > 65535) {
      return InvalidArgumentError("--rdzv_endpoint '" + text + "': port '" + port +
                                  "' is not a TCP port (1-65535, or 0 for any free port on a one-node job)");
    }
  }
  return Status::Ok();
}

Status ParseRendezvousConf(const std::string& text, RendezvousOptions& r) {
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    std::chrono::seconds* target = key == "join_timeout"        ? &r.join_timeout
                                   : key == "last_call_timeout" ? &r.last_call_timeout
                                                                : nullptr;
    if (target == nullptr) {
      return InvalidArgumentError("--rdzv_conf: unknown key '" + key +
                                  "'; dslaunch's rendezvous has join_timeout and last_call_timeout (seconds)");
    }
    int seconds = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || seconds < 1 ||
        seconds > kMaxRendezvousTimeoutSeconds) {
      return InvalidArgumentError("--rdzv_conf " + key + "='" + value + "': expected whole seconds from 1 to " +
                                  std::to_string(kMaxRendezvousTimeoutSeconds));
    }
    *target = std::chrono::seconds(seconds);
  }
  return Status::Ok();
}

Status ResolveNodeMode(const NodeModeArgs& a, CliOptions& o) {
  if (!a.backend.empty() && a.backend != "c10d" && a.backend != "static") {
    return InvalidArgumentError("--rdzv_backend " + a.backend +
                                ": dslaunch's own store plays the part of torchrun's c10d and static backends; "
                                "give c10d or static, or leave it out");
  }
  const int most_nodes = o.elastic_nodes ? o.elastic_nodes->max_nodes.value_or(1) : o.num_nodes.value_or(1);
  if (a.standalone) {
    if (o.hostfile || o.no_ssh || a.rendezvous_given || o.node_rank || most_nodes > 1) {
      return InvalidArgumentError("--standalone is a one-node job on this machine; it excludes --hostfile, --no_ssh, "
                                  "--rdzv_endpoint, --rdzv_id, --rdzv_conf, --node_rank and --nnodes above 1");
    }
    return Status::Ok();
  }
  if (o.hostfile || o.no_ssh) {
    if (a.rendezvous_given) {
      return InvalidArgumentError(std::string("--rdzv_endpoint, --rdzv_id and --rdzv_conf are for node mode, where ") +
                                  "every node runs dslaunch itself; they exclude " +
                                  (o.no_ssh ? "--no_ssh" : "--hostfile"));
    }
    return Status::Ok();
  }
  if (!a.rendezvous_given && !o.node_rank) return Status::Ok();
  RendezvousOptions r;
  if (!a.endpoint.empty()) {
    DSLAUNCH_RETURN_IF_ERROR(ParseEndpoint(a.endpoint, o.rdzv_port, r));
  } else if (!o.master_addr.empty()) {
    r.host = o.master_addr;
    r.port = o.rdzv_port;
  } else {
    return InvalidArgumentError(
        "node mode (--node_rank, --rdzv_id or --rdzv_conf without a hostfile) needs the rendezvous endpoint: "
        "--rdzv_endpoint HOST[:PORT] or --master_addr HOST, the address of the node that hosts it");
  }
  DSLAUNCH_RETURN_IF_ERROR(ParseRendezvousConf(a.conf, r));
  if (r.port == 0) {
    // torchrun's single-node idiom (torchtitan's default, --rdzv-endpoint localhost:0): a free port
    // that nobody else needs to know, which is a job on this machine as --standalone is.
    if (most_nodes > 1 || (o.node_rank && *o.node_rank > 0)) {
      return InvalidArgumentError("node mode: port 0 (any free port) is for a one-node job; with more nodes every "
                                  "node must know the rendezvous port: give one other than 0");
    }
    o.node_rank.reset();
    return Status::Ok();
  }
  if (o.elastic_nodes) {
    if (!o.elastic_nodes->max_nodes) {
      return InvalidArgumentError(o.elastic_nodes->option + ": node mode needs the most nodes too (MIN:MAX)");
    }
    r.min_nodes = o.elastic_nodes->min_nodes;
    r.max_nodes = *o.elastic_nodes->max_nodes;
  } else {
    r.min_nodes = r.max_nodes = o.num_nodes.value_or(1);
  }
  r.node_rank = o.node_rank;
  if (r.node_rank && *r.node_rank >= r.max_nodes) {
    return InvalidArgumentError("--node_rank " + std::to_string(*r.node_rank) + " is outside the " +
                                std::to_string(r.max_nodes) + " nodes of --nnodes");
  }
  if (o.job_id.empty()) {
    // Every node must name the job alike before it can authenticate: without --rdzv_id (torchrun's
    // default is "none") the endpoint names it.
    std::string id = "rdzv-" + r.host.substr(0, kMaxJobIdLength / 2) + "-" + std::to_string(r.port);
    for (char& c : id) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
    }
    o.job_id = id;
  }
  o.rendezvous = r;
  return Status::Ok();
}

Result<int> NprocPerNode(const CliOptions& options, int cores, int gpus) {
  if (options.num_gpus) return *options.num_gpus;
  if (!options.nproc_keyword) return 1;
  switch (*options.nproc_keyword) {
    case NprocKeyword::kAuto:
      return gpus > 0 ? gpus : cores;
    case NprocKeyword::kCpu:
      return cores;
    case NprocKeyword::kGpu:
      if (gpus > 0) return gpus;
      return InvalidArgumentError("--nproc_per_node gpu: this node has no GPU; use a number, cpu or auto");
  }
  return 1;
}

}  // namespace dslaunch::launcher
