// The launcher's descriptor limit. Its endpoint may hold a connection per rank and agent of the job
// plus HandshakeLimits more in their handshake (launcher/machine/connection_budget.h), far above the usual
// soft limit of 1024, so at start the launcher raises its soft RLIMIT_NOFILE to the hard limit: a flood of connections then meets the
// endpoint's own bounds (docs/protocol.md), which refuse and report, instead of failing accepts.
// Children get the soft limit back (SpawnOptions::soft_open_files_limit), so workers see the
// limit the user set, as they do on nodes reached over SSH. docs/launcher.md, "Descriptor limit".
#pragma once

#include <cstdint>

#include "common/status.h"

namespace dslaunch::launcher {

struct OpenFilesLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;
};

// Raises this process's soft RLIMIT_NOFILE to its hard limit when it is lower, and returns the
// limits as they were before. kInternal when the limit cannot be read or set (nothing changed).
Result<OpenFilesLimit> RaiseOpenFilesLimit();

}  // namespace dslaunch::launcher
