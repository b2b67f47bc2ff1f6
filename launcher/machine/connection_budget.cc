#include "launcher/machine/connection_budget.h"

#include <algorithm>

#include "common/check.h"

namespace dslaunch::launcher {

Result<ConnectionBudget> FitConnections(const ConnectionDemand& d, uint64_t descriptor_limit) {
  DSLAUNCH_CHECK(d.ranks >= 0 && d.nodes >= 0 && d.start_descriptors >= 0 &&
                 d.handshake_headroom >= 0)
      << "negative connection demand";
  ConnectionBudget b;
  b.planned = d.nodes + (d.store_proxy ? 0 : d.ranks);
  b.margin = std::max(kMinConnectionMargin, b.planned / kConnectionMarginDivisor);
  b.descriptors = b.planned + b.margin + d.start_descriptors + kReservedDescriptors;
  const auto needed = static_cast<uint64_t>(b.descriptors);
  if (needed <= descriptor_limit) {
    const uint64_t spare = descriptor_limit - needed;
    const int64_t extra = d.handshake_headroom + (d.store_proxy ? d.ranks : 0);
    b.max_connections = b.planned + b.margin + static_cast<int64_t>(std::min<uint64_t>(spare, extra));
    return b;
  }
  const std::string store = d.store_proxy ? std::string("store traffic proxied by the agents")
                                          : std::to_string(d.ranks) + " ranks' store";
  const std::string need = std::to_string(b.descriptors);
  return FailedPreconditionError(
      std::to_string(d.ranks) + " ranks on " + std::to_string(d.nodes) + (d.nodes == 1 ? " node" : " nodes") +
      " need up to " +
      std::to_string(b.planned + b.margin) + " connections to the launcher (" + std::to_string(d.nodes) +
      " agents, " + store + ", " + std::to_string(b.margin) + " margin), " + need +
      " descriptors in all, but the launcher's descriptor limit is " + std::to_string(descriptor_limit) +
      "; raise the hard limit to at least " + need + " (`ulimit -n " + need +
      "` before starting dslaunch, as root or after raising nofile in /etc/security/limits.conf; "
      "LimitNOFILE=" + need + " in a systemd unit)" +
      (d.store_proxy ? std::string()
                     : ", or have the workers reach the launcher through their agents' store proxy, "
                       "which needs a connection per node instead of one per rank"));
}

}  // namespace dslaunch::launcher
