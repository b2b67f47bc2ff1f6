// Node mode's edge (docs/node-mode.md): one dslaunch per node, started by a scheduler (a Kubernetes
// Indexed Job, `srun`, a PyTorchJob's pods). This process either hosts the rendezvous endpoint and
// the job (the launcher, JobRunner::RunNodeMode) or joins it (it becomes its node's agent).
// DecideNodeRole is pure; the rest looks at this machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace dslaunch::launcher {

enum class NodeRole { kHost, kJoin };

// What this machine says about the endpoint.
struct NodeRoleFacts {
  std::optional<int> node_rank;  // --node_rank
  bool endpoint_is_local = false;  // the endpoint's host is an address of this machine
  bool port_in_use = false;        // something here already listens on the endpoint's port
};

// Who hosts the endpoint: node rank 0 when ranks are given (torchrun's static rendezvous, an
// Indexed Job's JOB_COMPLETION_INDEX); without one, the node whose address the endpoint is, unless
// another process of this machine already hosts it (several nodes on one machine: the first one
// there hosts). Every other node joins.
NodeRole DecideNodeRole(const NodeRoleFacts& facts);

// Whether `host` (a name or a literal) resolves to an address of one of this machine's interfaces.
// kInvalidArgument when it does not resolve (yet: a Service's DNS name may appear late).
Result<bool> IsAddressOfThisMachine(const std::string& host);

// Whether a TCP socket of this machine already listens on `port` (any address): binding the
// wildcard address to it fails with EADDRINUSE.
bool PortInUse(uint16_t port);

}  // namespace dslaunch::launcher
