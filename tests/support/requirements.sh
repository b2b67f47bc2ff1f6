#!/usr/bin/env bash
# tests/support/skip.h's rule for the bash fixtures and tests (cluster, slurm, container,
# kubernetes): a test that cannot run here prints the skip token, which CTest reports as skipped,
# unless this machine is required to run it (DSLAUNCH_REQUIRE names it or `all`, or CI is true,
# and DSLAUNCH_ALLOW_SKIP does not name it); then it fails. Sourced, not run.

# True when the comma-separated list $1 names $2 or "all".
names() {
  local item items
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do
    [[ "$item" == all || "$item" == "$2" ]] && return 0
  done
  return 1
}

# Whether a missing requirement $1 fails instead of skipping.
required() {
  if [[ -n "${DSLAUNCH_ALLOW_SKIP:-}" ]] && names "$DSLAUNCH_ALLOW_SKIP" "$1"; then return 1; fi
  if [[ -n "${DSLAUNCH_REQUIRE+set}" ]]; then names "$DSLAUNCH_REQUIRE" "$1"; return; fi
  [[ "${CI:-}" == true || "${CI:-}" == 1 ]]
}

# skip_or_fail REQUIREMENT WHY: the tier of REQUIREMENT cannot run here, because WHY. Exits 1 where
# it is required, else prints the skip token and exits 0.
skip_or_fail() {
  if required "$1"; then
    echo "$1 tier: required here (DSLAUNCH_REQUIRE, or CI) but $2; DSLAUNCH_ALLOW_SKIP=$1 lets it skip" >&2
    exit 1
  fi
  echo "DSLAUNCH_TEST_SKIPPED: $1: $2"
  exit 0
}

# disk_space_require DIR BYTES WHAT: fails (exit 1) unless DIR's file system has BYTES free, naming
# both figures and WHAT needs them, so that a full disk is said as such rather than met as a
# write error halfway through a test.
disk_space_require() {
  local free
  free=$(( $(df --output=avail -k "$1" | tail -1) * 1024 ))
  if (( free < $2 )); then
    echo "FAIL: $1 has $(( free >> 20 )) MiB free; $3 needs about $(( $2 >> 20 )) MiB there (free some space: df -h $1)" >&2
    exit 1
  fi
}
