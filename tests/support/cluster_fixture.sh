#!/usr/bin/env bash
# CTest fixture for the `cluster` tests: brings the namespaced test cluster up (or down) with
# scripts/netns-cluster.sh. It needs root and network namespaces. Without them it fails where the
# cluster tier is required (DSLAUNCH_REQUIRE names `cluster` or `all`, or CI is true, and
# DSLAUNCH_ALLOW_SKIP does not name it: the rule of tests/support/skip.h) and otherwise prints the
# skip token, so that CTest reports it, and then every cluster test, as skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"

# True when the comma-separated list $1 names $2 or "all".
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

if [[ $EUID -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
  why="the test cluster needs root and 'ip netns'"
  if required cluster; then
    echo "cluster fixture: the cluster tier is required here (DSLAUNCH_REQUIRE, or CI) but $why;" \
      "DSLAUNCH_ALLOW_SKIP=cluster lets it skip" >&2
    exit 1
  fi
  echo "DSLAUNCH_TEST_SKIPPED: cluster: $why"
  exit 0
fi
exec bash "$here/scripts/netns-cluster.sh" "$@"
