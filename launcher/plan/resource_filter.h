// Resource selection: which hosts and which slots (accelerator ids) of a Hostfile a job uses, from
// DeepSpeed's --include / --exclude / --num_nodes / --num_gpus (--nproc_per_node) options.
// The filter grammar is specified in docs/hostfile.md ("Selecting resources"). Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/hostfile.h"

namespace dslaunch::launcher {

// The slots selected on one host. `slots` is sorted ascending, without duplicates, never empty in
// a Resources returned by SelectResources.
struct NodeResources {
  std::string user;  // from the hostfile's `user@host`; empty: the current user
  std::string host;
  std::vector<int> slots;

  friend bool operator==(const NodeResources&, const NodeResources&) = default;
};

// Selected hosts, in hostfile order (node rank i is Resources[i]).
using Resources = std::vector<NodeResources>;

struct FilterOptions {
  // NODE_SPEC[@NODE_SPEC...], NODE_SPEC = HOST[:SLOT[,SLOT...]], IPv6 hosts in brackets.
  std::string include;  // use only these hosts / slots; empty: no include filter
  std::string exclude;  // use everything but these hosts / slots; empty: no exclude filter
  std::optional<int> num_nodes;  // use the first N hosts of the hostfile
  std::optional<int> num_gpus;   // use slots 0..N-1 on every selected host (--nproc_per_node)
};

// Applies `options` to `hostfile`. With no option set, every slot of every host is selected.
// Rules (DeepSpeed's, with the decisions documented in docs/hostfile.md):
//   - include and exclude are mutually exclusive, and both are exclusive with num_nodes/num_gpus;
//   - a HOST without slots means all of its slots; repeated hosts and slots are merged (a bare HOST
//     anywhere in the list wins over slot lists for that host);
//   - every named host must be in the hostfile and every slot id in 0..slots-1;
//   - hosts left with no slot by --exclude are dropped; excluding everything is an error;
//   - num_nodes N takes the first N hosts (1 <= N <= number of hosts);
//   - num_gpus N selects slots 0..N-1 on each host (1 <= N <= kMaxSlotsPerHost; N may exceed the
//     host's `slots`, as in DeepSpeed, but not its `max_slots` when the hostfile gives one).
// Fails with kInvalidArgument naming the option and the offending token.
Result<Resources> SelectResources(const Hostfile& hostfile, const FilterOptions& options);

}  // namespace dslaunch::launcher
