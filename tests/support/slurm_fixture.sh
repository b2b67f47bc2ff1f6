#!/usr/bin/env bash
# CTest fixture for the `slurm` tests: a real Slurm on the namespaced test cluster (the `cluster`
# fixture brings that up first), with scripts/slurm-cluster.sh. It needs root, network namespaces
# and the packages slurmctld slurmd slurm-client munge (scripts/setup.sh installs them). Without
# them it fails where the slurm tier is required (DSLAUNCH_REQUIRE names `slurm` or `all`, or CI is
# true, and DSLAUNCH_ALLOW_SKIP does not name it: the rule of tests/support/skip.h) and otherwise
# prints the skip token, so that CTest reports it, and every slurm test, as skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
source "$here/tests/support/requirements.sh"

why=""
if [[ $EUID -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
  why="the Slurm test cluster needs root and 'ip netns'"
elif ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null ||
     ! command -v munged >/dev/null; then
  why="Slurm is not installed (slurmctld slurmd slurm-client munge: scripts/setup.sh)"
elif [[ "${1:-}" == up && ! -f "${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-cluster}/nodes" ]]; then
  why="the namespaced test cluster is not up (the cluster fixture failed or was skipped)"
fi
[[ -z "$why" ]] || skip_or_fail slurm "$why"
exec bash "$here/scripts/slurm-cluster.sh" "$@"
