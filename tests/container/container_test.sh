#!/usr/bin/env bash
# The container tier (CTest label `container`, fixture tests/support/container_fixture.sh builds
# the image): dslaunch run from its image by podman, as the image's non-root user, with a host
# directory as the job's volume (docs/containers.md).
#
#   container_test.sh train      --version, and a 2-rank gpt-demo job whose metrics and
#                                checkpoint land on the volume (the docs' example)
#   container_test.sh stop       `podman stop` (SIGTERM to PID 1) of a training job: it stops
#                                within the grace period, the save-on-stop checkpoint is on the
#                                volume, the container's exit code is dslaunch's (143)
#   container_test.sh zombies    orphans of a worker and of a `podman exec` are reaped: no
#                                <defunct> process in the container after they exit
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/container/container_lib.sh
source "$here/tests/container/container_lib.sh"
require_podman_or_skip
podman image exists "$image" || fail "image $image missing: the container_up fixture did not build it"

# A loaded 2-core machine starts two ranks and trains a step in a few seconds; these bound the
# waits generously (they are failure bounds, not speed checks).
readonly kJobLimit=180          # seconds for the 5-step job of `train`
readonly kFirstStepLimit=120    # seconds until the stop test's job has trained a step
# The grace period podman stop gives before SIGKILL, Kubernetes' terminationGracePeriodSeconds
# default.
readonly kStopGrace=30
# dslaunch's exit code when it was stopped by SIGTERM: 128 + 15 (docs/cli.md, "Exit codes").
readonly kSigtermExit=143

volume="$(make_volume)"
name="${container_prefix}$1-$$"
cleanup() {
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  rm -rf "$volume"
}
trap cleanup EXIT

# The job directory dslaunch made under /work/logs (one job per volume).
job_dir() {
  local dirs=("$volume"/logs/*/)
  [[ -d "${dirs[0]}" ]] || return 1
  echo "${dirs[0]%/}"
}

# The newest complete checkpoint named by checkpoints/latest, with its meta.json.
check_checkpoint() {
  local latest="$volume/checkpoints/latest"
  [[ -f "$latest" ]] || fail "no checkpoint on the volume ($latest missing); files: $(find "$volume" | head -40)"
  local step_dir
  step_dir="$volume/checkpoints/$(tr -d '[:space:]' <"$latest")"
  [[ -f "$step_dir/meta.json" ]] || fail "checkpoint $step_dir has no meta.json"
  [[ -f "$step_dir/rank00000.safetensors" && -f "$step_dir/rank00001.safetensors" ]] ||
    fail "checkpoint $step_dir lacks a rank's shard: $(ls "$step_dir")"
  echo "$step_dir"
}

# Every file the job wrote on the volume belongs to the image's non-root user.
check_owner() {
  local foreign
  foreign="$(find "$volume" ! -user "${image_user%%:*}" -print)"
  [[ -z "$foreign" ]] || fail "files on the volume not owned by uid ${image_user%%:*}: $foreign"
}

case_train() {
  local version
  version="$(podman run --rm "$image" --version)"
  [[ "$version" == "dslaunch "* ]] || fail "--version printed '$version'"
  echo "image: $version"
  [[ "$(podman run --rm --entrypoint id "$image" -u)" == "${image_user%%:*}" ]] || fail "the image does not run as uid ${image_user%%:*}"

  # The example of docs/containers.md, "Run a job".
  cp "$here/tests/container/gpt-demo-short.json" "$volume/train.json"
  chown "$image_user" "$volume/train.json"
  local rc=0
  timeout "$kJobLimit" podman run --rm --name "$name" -v "$volume:/work" "$image" \
    --log_dir /work/logs --nproc_per_node 2 train.json >"$volume/console.log" 2>&1 || rc=$?
  cat "$volume/console.log"
  [[ $rc -eq 0 ]] || fail "the job exited $rc"
  local dir
  dir="$(job_dir)" || fail "no job directory under $volume/logs"
  grep -q '"event":"step"' "$dir/metrics.jsonl" || fail "no step in $dir/metrics.jsonl"
  local last_step
  last_step="$(grep '"event":"step"' "$dir/metrics.jsonl" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')"
  [[ "$last_step" == 5 ]] || fail "the last step in metrics.jsonl is $last_step, not 5"
  local ckpt
  ckpt="$(check_checkpoint)"
  [[ "$(basename "$ckpt")" == global_step5 ]] || fail "the final checkpoint is $ckpt, not global_step5"
  rm -f "$volume/console.log"
  check_owner
  echo "trained 5 steps in the container; metrics $dir/metrics.jsonl, checkpoint $ckpt"
}

case_stop() {
  sed 's/"steps": 5,/"steps": 1000000,/' "$here/tests/container/gpt-demo-short.json" >"$volume/train.json"
  grep -q '"steps": 1000000' "$volume/train.json" || fail "could not lengthen the job's config"
  chown "$image_user" "$volume/train.json"
  podman run -d --name "$name" -v "$volume:/work" "$image" \
    --log_dir /work/logs --nproc_per_node 2 train.json >/dev/null
  has_step() {
    local dir
    dir="$(job_dir)" && grep -q '"event":"step"' "$dir/metrics.jsonl" 2>/dev/null
  }
  wait_for "$kFirstStepLimit" "the first training step" has_step
  [[ ! -e "$volume/checkpoints/latest" ]] || fail "a checkpoint exists before the stop: the test would prove nothing"

  local t0=$SECONDS
  podman stop -t "$kStopGrace" "$name" >/dev/null
  local took=$((SECONDS - t0))
  local code log
  code="$(podman inspect --format '{{.State.ExitCode}}' "$name")"
  # Read once into a variable: `podman logs | grep -q` under pipefail fails when grep's early exit
  # gives podman a SIGPIPE.
  log="$(podman logs "$name" 2>&1)"
  tail -15 <<<"$log"
  echo "podman stop took ${took} s; exit code $code"
  ((took < kStopGrace)) || fail "the job did not stop within the ${kStopGrace} s grace period (podman killed it)"
  [[ "$code" == "$kSigtermExit" ]] || fail "the container exited $code, not $kSigtermExit (dslaunch stopped by SIGTERM)"
  grep -q "checkpoint (stop)" <<<"$log" || fail "the log shows no save-on-stop checkpoint"
  local ckpt
  ckpt="$(check_checkpoint)"
  check_owner
  echo "stopped with exit code $code; save-on-stop checkpoint $ckpt"
}

# Lines of `ps` inside the container for processes in state Z (zombies).
zombies() {
  podman exec "$name" ps -eo pid=,ppid=,stat=,args= | awk '$3 ~ /^Z/'
}

case_zombies() {
  # The worker's orphan goes to the agent (a child subreaper); an orphan made by `podman exec`
  # has no subreaper above it in the container and goes to PID 1, dslaunch itself.
  local worker_life=12
  podman run -d --name "$name" -v "$here/tests/container:/tests:ro" "$image" \
    --nproc_per_node 2 --no_python /tests/orphan_worker.sh "$worker_life" >/dev/null
  running_workers() { [[ "$(podman exec "$name" ps -eo args= | grep -c '^sleep '"$worker_life")" == 2 ]]; }
  wait_for 60 "the two workers" running_workers
  podman exec "$name" sh -c '( sleep 2 & ) >/dev/null 2>&1'
  local ps_before
  ps_before="$(podman exec "$name" ps -eo pid=,ppid=,stat=,args=)"
  echo "processes while the orphans live:"
  echo "$ps_before"
  [[ -n "$(awk '$2 == 1 && $4 == "sleep" && $5 == "2"' <<<"$ps_before")" ]] ||
    fail "the exec'd orphan was not reparented to PID 1: the test would prove nothing"
  [[ "$(awk '$1 == 1 {print $4}' <<<"$ps_before")" == dslaunch ]] || fail "PID 1 is not dslaunch"
  # The orphans exit after 1 and 2 s; give the reaper a moment beyond that.
  sleep 4
  local ps_after left
  ps_after="$(podman exec "$name" ps -eo pid=,ppid=,stat=,args=)"
  echo "processes after the orphans exited:"
  echo "$ps_after"
  left="$(zombies)"
  [[ -z "$left" ]] || fail "zombies left in the container (pid ppid stat args): $left"
  local rc
  rc="$(podman wait "$name")"
  [[ "$rc" == 0 ]] || fail "the job exited $rc"
  echo "no <defunct> process; the job exited 0"
}

case "${1:-}" in
  train) case_train ;;
  stop) case_stop ;;
  zombies) case_zombies ;;
  *) echo "usage: container_test.sh train|stop|zombies" >&2; exit 2 ;;
esac
