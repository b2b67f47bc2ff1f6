#!/usr/bin/env bash
# Configures (once) and builds dslaunch into build/ with Ninja. Extra arguments go to CMake, e.g.
#   scripts/build.sh -DDSLAUNCH_SANITIZE=address
# DSLAUNCH_BUILD_TARGETS names the Ninja targets to build (all when unset): scripts/demo.sh builds
# only the three programs the demo runs, and the test command the rest later.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${DSLAUNCH_BUILD_DIR:-build}"
if [[ ! -f "$build_dir/build.ninja" || $# -gt 0 ]]; then
  cmake -S . -B "$build_dir" -G Ninja "$@"
fi
# shellcheck disable=SC2086  # a space-separated list of target names
ninja -C "$build_dir" ${DSLAUNCH_BUILD_TARGETS:-}
