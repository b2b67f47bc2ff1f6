// The fault-tolerance options as given on the command line (docs/cli.md, "Fault tolerance") and
// their resolution into CliOptions: torchrun's --nnodes N|MIN:MAX, DeepSpeed's --elastic_training
// range, --max_restarts. Pure; cli.cc's FaultGroup fills ElasticArgs from CLI11.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "launcher/cli/cli.h"

namespace dslaunch::launcher {

// The fault-tolerance options as given (docs/cli.md, "Fault tolerance"); absent: not given.
struct ElasticArgs {
  std::optional<std::string> nnodes;
  bool elastic_training = false;
  std::optional<int> min_elastic_nodes;
  std::optional<int> max_elastic_nodes;
  std::optional<int> max_restarts;
};

// Fills num_nodes (from --nnodes N), elastic_nodes and max_restarts of `o`; o.num_nodes holds
// --num_nodes already.
// kInvalidArgument naming the options for a bad or conflicting count, range or budget.
Status ResolveElastic(const ElasticArgs& a, CliOptions& o);

}  // namespace dslaunch::launcher
