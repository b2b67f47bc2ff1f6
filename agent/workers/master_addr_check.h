// The check of MASTER_ADDR on the node that runs rank 0, before its workers start. PyTorch's
// env:// rendezvous (and DeepSpeed's on top of it) starts its TCPStore server in rank 0 and has
// every rank, rank 0 included, connect to MASTER_ADDR:MASTER_PORT; a MASTER_ADDR that is not an
// address of rank 0's node leaves every rank waiting until the rendezvous times out, in silence.
// The agent of that node says so first (docs/launch-plan.md, "MASTER_ADDR on rank 0's node").
// It is a warning, not a refusal: an address that reaches the node through NAT or a Kubernetes
// ClusterIP Service works without being bindable there. Pure.
#pragma once

#include <string>
#include <vector>

#include "common/route.h"
#include "common/status.h"

namespace dslaunch::agent {

// The warning for MASTER_ADDR `master_addr` as probed on node `node` (its host name, e.g. "w-0")
// by ResolveAndProbe, with the node's own addresses (MachineAddresses) to name in it; "" when
// MASTER_ADDR resolves to an address the node holds.
std::string MasterAddrWarning(const std::string& master_addr, const Result<HostAddresses>& probe,
                              const std::string& node, const std::vector<std::string>& node_addresses);

}  // namespace dslaunch::agent
