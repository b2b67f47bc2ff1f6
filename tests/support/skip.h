// Test support: a test that cannot run on this machine says so in a way CTest reports as skipped,
// or fails where the machine was required to have what it needs (docs/building.md, "Skipped
// tests").
//
// DSLAUNCH_SKIP_UNLESS(available, requirement, reason) in a doctest case (or a function returning
// void) does nothing when `available` holds. Otherwise, when `requirement` is required (see
// RequirementIsMandatory) it fails the case with `reason`; when it is not, it prints the line
//   DSLAUNCH_TEST_SKIPPED: <requirement>: <reason>
// which the SKIP_REGULAR_EXPRESSION of every test in tests/CMakeLists.txt matches, and returns
// from the case. The requirement names are kRequirementNames.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dslaunch::testing {

// The token CTest's SKIP_REGULAR_EXPRESSION looks for; tests/support/cluster_fixture.sh prints
// the same one.
inline constexpr char kSkipToken[] = "DSLAUNCH_TEST_SKIPPED";

// What a test may need that a machine may lack. `all` in DSLAUNCH_REQUIRE means every one.
//   cluster: root and `ip netns` for the namespaced test cluster (scripts/netns-cluster.sh)
//   ipv6:    an IPv6 loopback address (::1)
//   sse42:   the SSE4.2 crc32 instruction (the hardware CRC-32C path)
//   f16c:    the F16C conversion instructions (the hardware fp16 path)
//   avx:     AVX, for OpenBLAS's Sandybridge kernels (the forced kernel choice)
//   pidns:   `unshare --pid --fork --mount-proc` (root, or user namespaces): dslaunch as PID 1
//   slurm:   Slurm and munge on the test cluster (scripts/slurm-cluster.sh)
//   container: root and podman, for the container tier (bash: tests/container/container_lib.sh)
//   kubernetes: root, podman, ip netns and python3-yaml (bash: tests/kubernetes/k8s_lib.sh)
//   io_uring: io_uring_queue_init works (seccomp profiles of containers refuse it)
//   promtool: /usr/bin/promtool (Debian's prometheus package), the /metrics format check
//   chromium: /usr/bin/chromium, the browser tier (tests/support/headless_chromium.sh)
//   torch:   /usr/bin/python3 imports torch (Debian's python3-torch): the PyTorch DDP cluster test
//   gpu:     a CUDA device (tests/support/gpu_device.h); .ci/run allows it to skip, since CI
//            machines have none, and scripts/gpu-check.sh requires it
inline constexpr std::string_view kRequirementNames[] = {"cluster", "ipv6", "sse42", "f16c", "avx", "pidns", "slurm", "io_uring",
                                                         "promtool", "chromium", "torch", "gpu"};

// True when `list` (comma-separated names, or "all") names `requirement`.
inline bool ListNames(std::string_view list, std::string_view requirement) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (item == "all" || item == requirement) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Whether a missing `requirement` fails a test instead of skipping it. Read from the
// environment, at this edge only:
//   DSLAUNCH_REQUIRE      names the required ones ("all", or e.g. "cluster,ipv6"); when unset it
//                         is "all" if CI is "true" or "1", and empty otherwise.
//   DSLAUNCH_ALLOW_SKIP   names ones that may skip anyway ("all", or a list); it wins.
inline bool RequirementIsMandatory(std::string_view requirement) {
  const char* allow = std::getenv("DSLAUNCH_ALLOW_SKIP");
  if (allow != nullptr && ListNames(allow, requirement)) return false;
  const char* require = std::getenv("DSLAUNCH_REQUIRE");
  if (require != nullptr) return ListNames(require, requirement);
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string_view(ci) == "true" || std::string_view(ci) == "1");
}

// Prints the skip line (stdout, flushed, so that it is in CTest's capture however the test ends).
inline void PrintSkipped(std::string_view requirement, const std::string& reason) {
  std::printf("%s: %.*s: %s\n", kSkipToken, static_cast<int>(requirement.size()), requirement.data(),
              reason.c_str());
  std::fflush(stdout);
}

}  // namespace dslaunch::testing

#define DSLAUNCH_SKIP_UNLESS(available, requirement, reason)                                             \
  do {                                                                                                   \
    if (!(available)) {                                                                                  \
      const std::string dslaunch_skip_reason_ = (reason);                                                \
      if (::dslaunch::testing::RequirementIsMandatory(requirement)) {                                    \
        FAIL("'" << (requirement) << "' is required here (DSLAUNCH_REQUIRE, or CI) but missing: "        \
                 << dslaunch_skip_reason_ << " (DSLAUNCH_ALLOW_SKIP=" << (requirement) << " lets it skip)"); \
      }                                                                                                  \
      ::dslaunch::testing::PrintSkipped(requirement, dslaunch_skip_reason_);                             \
      return;                                                                                            \
    }                                                                                                    \
  } while (false)
