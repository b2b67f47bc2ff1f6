#!/usr/bin/env bash
# CTest fixture for the `container` tests: builds the image once (scripts/build-image.sh, which
# also makes the Debian base when no registry gives it) under the tag $DSLAUNCH_TEST_IMAGE, and
# removes the tests' leftover containers at the end. Before the build and at the end it removes
# dangling images: each build leaves the previous one's layers untagged (about 1.4 GB, the build
# stage's compiled tree), and on a machine that keeps its image store from run to run they would
# fill the disk (docs/testing.md, "Disk"). It needs root and podman. Without them it
# fails where the container tier is required (DSLAUNCH_REQUIRE names `container` or `all`, or CI
# is true, and DSLAUNCH_ALLOW_SKIP does not name it: the rule of tests/support/skip.h) and
# otherwise prints the skip token, so that CTest reports it as skipped.
#
#   container_fixture.sh up|down
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/container/container_lib.sh
source "$here/tests/container/container_lib.sh"

case "${1:-}" in
  up)
    require_podman_or_skip
    podman image prune -f >/dev/null
    echo "container_up: $(df -h --output=avail "$(podman info --format '{{.Store.GraphRoot}}')" | tail -1 | tr -d ' ') free for the image store"
    exec bash "$here/scripts/build-image.sh" --tag "$image"
    ;;
  down)
    if [[ $EUID -eq 0 ]] && command -v podman >/dev/null 2>&1; then
      mapfile -t leftovers < <(podman ps -a --filter "name=^$container_prefix" --format '{{.Names}}')
      if [[ ${#leftovers[@]} -gt 0 ]]; then podman rm -f -t 0 "${leftovers[@]}" >/dev/null; fi
      podman image prune -f >/dev/null
    fi
    ;;
  *) echo "usage: container_fixture.sh up|down" >&2; exit 2 ;;
esac
