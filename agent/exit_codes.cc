#include "agent/exit_codes.h"

#include "common/exit_codes.h"
#include "common/exit_status.h"

namespace dslaunch::agent {

int NodeModeExitCode(std::optional<int> released_code, int stop_signal) {
  if (released_code) return *released_code;
  if (stop_signal > 0) return ShellExitCode(ExitStatus::Signaled(stop_signal));
  return kExitInfrastructure;
}

}  // namespace dslaunch::agent
