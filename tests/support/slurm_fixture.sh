#!/usr/bin/env bash
# CTest fixture for the `slurm` tests: a real Slurm on the namespaced test cluster (the `cluster`
# fixture brings that up first), with scripts/slurm-cluster.sh. It needs root, network namespaces
# and the packages slurmctld slurmd slurm-client munge (scripts/setup.sh installs them). Without
# them it fails where the slurm tier is required (DSLAUNCH_REQUIRE names `slurm` or `all`, or CI is
# true, and DSLAUNCH_ALLOW_SKIP does not name it: the rule of tests/support/skip.h) and otherwise
# prints the skip token, so that CTest reports it, and every slurm test, as skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"

names() {
  local item
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do
    [[ "$item" == all || "$item" == "$2" ]] && return 0
  done
  return 1
}

required() {
  if [[ -n "${DSLAUNCH_ALLOW_SKIP:-}" ]] && names "$DSLAUNCH_ALLOW_SKIP" "$1"; then return 1; fi
  if [[ -n "${DSLAUNCH_REQUIRE+set}" ]]; then names "$DSLAUNCH_REQUIRE" "$1"; return; fi
  [[ "${CI:-}" == true || "${CI:-}" == 1 ]]
}

why=""
if [[ $EUID -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
  why="the Slurm test cluster needs root and 'ip netns'"
elif ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null ||
     ! command -v munged >/dev/null; then
  why="Slurm is not installed (slurmctld slurmd slurm-client munge: scripts/setup.sh)"
elif [[ "${1:-}" == up && ! -f "${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-cluster}/nodes" ]]; then
  why="the namespaced test cluster is not up (the cluster fixture failed or was skipped)"
fi
if [[ -n "$why" ]]; then
  if required slurm; then
    echo "slurm fixture: the slurm tier is required here (DSLAUNCH_REQUIRE, or CI) but $why;" \
      "DSLAUNCH_ALLOW_SKIP=slurm lets it skip" >&2
    exit 1
  fi
  echo "DSLAUNCH_TEST_SKIPPED: slurm: $why"
  exit 0
fi
exec bash "$here/scripts/slurm-cluster.sh" "$@"
