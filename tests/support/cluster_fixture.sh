#!/usr/bin/env bash
# CTest fixture for the `cluster` tests: brings the namespaced test cluster up (or down) with
# scripts/netns-cluster.sh. It needs root and network namespaces. Without them it fails where the
# cluster tier is required (DSLAUNCH_REQUIRE names `cluster` or `all`, or CI is true, and
# DSLAUNCH_ALLOW_SKIP does not name it: the rule of tests/support/skip.h) and otherwise prints the
# skip token, so that CTest reports it, and then every cluster test, as skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
source "$here/tests/support/requirements.sh"

if [[ $EUID -ne 0 ]] || ! ip netns list >/dev/null 2>&1; then
  skip_or_fail cluster "the test cluster needs root and 'ip netns'"
fi
exec bash "$here/scripts/netns-cluster.sh" "$@"
