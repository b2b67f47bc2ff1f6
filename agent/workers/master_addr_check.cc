#include "agent/workers/master_addr_check.h"

#include "common/text.h"

namespace dslaunch::agent {
namespace {

// What to do, the same in both forms of the warning.
std::string Advice(const std::string& node) {
  return "pass --master_addr with an address of " + node + ", or leave it unset (the first host)";
}

}  // namespace

std::string MasterAddrWarning(const std::string& master_addr, const Result<HostAddresses>& probe,
                              const std::string& node, const std::vector<std::string>& node_addresses) {
  const std::string where = node + ", which runs rank 0";
  if (!probe.ok()) {
    return "warning: MASTER_ADDR " + master_addr + " does not resolve on " + where + " (" +
           probe.status().message() + "): a PyTorch env:// rendezvous there cannot start; " + Advice(node) + ".";
  }
  if (!probe->local.empty()) return "";
  const std::string resolved =
      probe->resolved.size() == 1 && probe->resolved.front() == master_addr ? "" : " (" + JoinText(probe->resolved, ", ") + ")";
  const std::string held = node_addresses.empty() ? "" : " (its addresses: " + JoinText(node_addresses, ", ") + ")";
  return "warning: MASTER_ADDR " + master_addr + resolved + " is not an address of " + where + held +
         ": a PyTorch env:// rendezvous listens on rank 0's node and every rank connects to MASTER_ADDR, "
         "so the ranks would wait there until its timeout; " +
         Advice(node) + ". If it reaches " + node + " through NAT or a Kubernetes ClusterIP Service, ignore this.";
}

}  // namespace dslaunch::agent
