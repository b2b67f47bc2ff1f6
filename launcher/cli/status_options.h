// The status page's options as given on the command line (docs/observability.md) and their
// checks. Pure; cli.cc's StatusGroup fills StatusArgs from CLI11.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/cli/cli.h"

namespace dslaunch::launcher {

// The status page's options as given on the command line.
struct StatusArgs {
  bool port_given = false;
  int port = -1;
  bool bind_given = false;
  std::string bind;
  std::vector<std::string> hosts;  // --status_host, each value split at commas
  bool metrics_open = false;
};

// --status_port, --status_bind, --status_host and --status_metrics_open into `o`.
// kInvalidArgument naming the option: a port outside 0-65535, a name for --status_bind, a bad
// --status_host, or any of them without --status_port.
Status ResolveStatusPage(const StatusArgs& a, CliOptions& o);

}  // namespace dslaunch::launcher
