#!/usr/bin/env bash
# A command under a memory cap, for the scripts that check what fits (scripts/offload-*.sh): a
# cgroup v1 memory group made for the run, capped without swap, its peak read and the group
# removed. Sourced, not run; needs tests/support/requirements.sh sourced first.

memory_cgroup_root=/sys/fs/cgroup/memory

# Exits through skip_or_fail unless this is root with the cgroup v1 memory controller.
memory_cgroup_require() {
  if [[ $EUID -ne 0 || ! -w "$memory_cgroup_root" ]]; then
    skip_or_fail cgroup_memory "needs root and the cgroup v1 memory controller at $memory_cgroup_root"
    exit 0
  fi
}

# memory_cgroup_remove GROUP: anything left in GROUP (a path under the root) is ours, moved out so
# that the group can be removed; for a script's EXIT trap.
memory_cgroup_remove() {
  [[ -d "$1" ]] || return 0
  while read -r pid; do echo "$pid" > "$memory_cgroup_root/cgroup.procs" 2>/dev/null || true; done < "$1/cgroup.procs"
  rmdir "$1" 2>/dev/null || true
}

# memory_cgroup_run GROUP CAP_BYTES COMMAND...: COMMAND in the fresh group GROUP capped at
# CAP_BYTES (no swap: the cap is the memory it may use), with 2 OpenMP and OpenBLAS threads;
# memory_cgroup_peak is then the group's peak in bytes. Returns COMMAND's exit code.
memory_cgroup_run() {
  local group="$1" cap="$2" rc=0
  shift 2
  mkdir "$group"
  echo "$cap" > "$group/memory.limit_in_bytes"
  echo "$cap" > "$group/memory.memsw.limit_in_bytes" 2>/dev/null || true
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$group" "$@" ||
    rc=$?
  memory_cgroup_peak=$(cat "$group/memory.max_usage_in_bytes")
  rmdir "$group"
  return $rc
}
