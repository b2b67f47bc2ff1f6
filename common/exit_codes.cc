// The exit-code schemes of common/exit_codes.h. Pure.
#include "common/exit_codes.h"

namespace dslaunch {

int SchedulerExitCode(int code, ExitCodeScheme scheme) {
  if (scheme != ExitCodeScheme::kKubeflow) return code;
  if (code == kExitInfrastructure) return kExitInfrastructureKubeflow;
  if (code == kExitRequeue) return kExitRequeueKubeflow;
  return code;
}

Result<ExitCodeScheme> ParseExitCodeScheme(std::string_view text) {
  if (text == "classes") return ExitCodeScheme::kClasses;
  if (text == "kubeflow") return ExitCodeScheme::kKubeflow;
  return InvalidArgumentError("--exit_codes '" + std::string(text) +
                              "': expected 'classes' (75 infrastructure, 76 requeue, the default) or 'kubeflow' "
                              "(203 and 204, which a PyTorchJob with restartPolicy ExitCode retries)");
}

std::string_view ExitCodeSchemeName(ExitCodeScheme scheme) {
  return scheme == ExitCodeScheme::kKubeflow ? "kubeflow" : "classes";
}

}  // namespace dslaunch
