#!/usr/bin/env bash
# Shared by the container tier: tests/support/container_fixture.sh and tests/container/*_test.sh.
# Sourced, not run, with $here the repository's root.

# shellcheck source=tests/support/requirements.sh
source "$here/tests/support/requirements.sh"

# The image the fixture builds and the tests run (a tag of their own, so that a test run does not
# replace an image someone built by hand).
image="${DSLAUNCH_TEST_IMAGE:-localhost/dslaunch:ctest}"
# Every container a test starts is named with this prefix; the fixture's `down` removes leftovers.
container_prefix="dslaunch-ctest-"
# The uid:gid of the image's non-root user (the Dockerfile's DSLAUNCH_UID).
image_user="1000:1000"

# Exits: 0 with the skip token when podman or root is missing and the tier is not required, 1 when
# it is required. Returns when the tier can run.
require_podman_or_skip() {
  local why=""
  if [[ $EUID -ne 0 ]]; then
    why="the container tier needs root (rootful podman: runc, the image's volumes)"
  elif ! command -v podman >/dev/null 2>&1; then
    why="podman is not installed (scripts/setup.sh installs it)"
  fi
  [[ -z "$why" ]] && return 0
  skip_or_fail container "$why"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A fresh host directory for /work in the container, owned by the image's user.
make_volume() {
  local dir
  dir="$(mktemp -d /tmp/dslaunch-ctest-vol.XXXXXX)"
  chown "$image_user" "$dir"
  echo "$dir"
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds; fails the
# test naming DESCRIPTION after SECONDS.
wait_for() {
  local limit="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= deadline)); then fail "timed out after ${limit} s waiting for $what"; fi
    sleep 0.2
  done
}
