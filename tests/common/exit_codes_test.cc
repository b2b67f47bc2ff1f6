// The exit-code schemes (common/exit_codes.h, docs/exit-codes.md): what a scheduler reads for each
// class under --exit_codes classes and kubeflow.
#include "common/exit_codes.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

TEST_CASE("SchedulerExitCode under kubeflow moves the retryable classes above 128 and nothing else") {
  struct Case {
    int code;
    int classes;
    int kubeflow;
  };
  // 0 success, 1 a program's failure, 2 configuration, 75 infrastructure, 76 requeue, 127 a missing
  // program, 137 SIGKILL, 143 SIGTERM, 203/204 a program's own codes that happen to be the targets.
  const Case cases[] = {{0, 0, 0},       {1, 1, 1},       {2, 2, 2},       {75, 75, 203}, {76, 76, 204},
                        {77, 77, 77},    {74, 74, 74},    {127, 127, 127}, {137, 137, 137},
                        {143, 143, 143}, {203, 203, 203}, {204, 204, 204}, {255, 255, 255}};
  for (const Case& c : cases) {
    CAPTURE(c.code);
    CHECK(SchedulerExitCode(c.code, ExitCodeScheme::kClasses) == c.classes);
    CHECK(SchedulerExitCode(c.code, ExitCodeScheme::kKubeflow) == c.kubeflow);
  }
}

TEST_CASE("The kubeflow codes are 128 + class, above every signal's 128+N and within an exit status") {
  CHECK(kExitInfrastructureKubeflow == 203);
  CHECK(kExitRequeueKubeflow == 204);
  constexpr int kLastLinuxSignal = 64;  // SIGRTMAX
  CHECK(kExitInfrastructureKubeflow > 128 + kLastLinuxSignal);
  CHECK(kExitRequeueKubeflow <= 255);
}

TEST_CASE("ParseExitCodeScheme takes classes and kubeflow, and names both for anything else") {
  CHECK(*ParseExitCodeScheme("classes") == ExitCodeScheme::kClasses);
  CHECK(*ParseExitCodeScheme("kubeflow") == ExitCodeScheme::kKubeflow);
  CHECK(ExitCodeSchemeName(ExitCodeScheme::kKubeflow) == "kubeflow");
  CHECK(ExitCodeSchemeName(ExitCodeScheme::kClasses) == "classes");
  for (const char* bad : {"", "Kubeflow", "pytorchjob", "kubeflow "}) {
    CAPTURE(bad);
    auto s = ParseExitCodeScheme(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    CHECK(s.status().message() == "--exit_codes '" + std::string(bad) +
                                      "': expected 'classes' (75 infrastructure, 76 requeue, the default) or "
                                      "'kubeflow' (203 and 204, which a PyTorchJob with restartPolicy ExitCode "
                                      "retries)");
  }
}

}  // namespace
}  // namespace dslaunch
