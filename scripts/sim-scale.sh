#!/usr/bin/env bash
# Control plane at scale (issue 16; docs/benchmarks.md "Control plane at scale"): N ranks on N/8
# nodes against a real launcher on loopback. Node 0 (the launcher, its agent and 8 workers) is
# real; the other nodes are simulated by build/bin/sim_scale, whose agents and ranks speak the real
# protocols from their own loopback addresses. Each size runs in two modes: direct (a store
# connection per rank, --store_proxy off) and proxied (the default: the node's combined requests,
# what an agent's store proxy sends upstream on its control connection). Prints a Markdown table for
# docs/benchmarks.md, with the machine, the date and the load.
#
#   scripts/sim-scale.sh [RANKS ...]          (default: 1024 16384 100000)
#
# SIM_MODES="direct proxied" picks the modes; SIM_ALLTOALL_MAX (default 2048) is the largest N
# that runs the all-to-all (N^2 store reads). 100k direct connections need about 230k descriptors
# between the launcher and the simulator: the script raises the limit (as root) and says so when
# it cannot; a size that does not fit is reported as such and the others still run.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${DSLAUNCH_BUILD_DIR:-build}"
if [[ ! -f "$build/build.ninja" ]]; then scripts/build.sh >/dev/null; fi
ninja -C "$build" dslaunch dslaunch-agent sim_scale sim_scale_worker >/dev/null

sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1024 16384 100000)
modes="${SIM_MODES:-direct proxied}"
alltoall_max="${SIM_ALLTOALL_MAX:-2048}"
# Enough for 100k ranks in direct mode: one descriptor per connection on each side.
want_fds=262144
if [[ "$(ulimit -Hn)" != unlimited && "$(ulimit -Hn)" -lt $want_fds ]]; then
  ulimit -Hn "$want_fds" 2>/dev/null || echo "sim-scale: cannot raise the hard descriptor limit from $(ulimit -Hn) to $want_fds (not root?): large sizes will report that they do not fit" >&2
fi
ulimit -n "$(ulimit -Hn)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${sizes[@]}"; do
  for mode in $modes; do
    run="$work/$n-$mode"
    mkdir -p "$run"
    echo "== $n ranks, $mode" >&2
    if ! "$build/bin/sim_scale" --launcher "$build/bin/dslaunch" --worker "$build/bin/sim_scale_worker" \
        --ranks "$n" --mode "$mode" --alltoall_max "$alltoall_max" --work_dir "$run" --json "$results" \
        2> >(tee "$run/stderr" >&2); then
      # The run's first line says why (e.g. the descriptor limit); the table repeats it.
      why="$(grep '^sim_scale: ' "$run/stderr" | grep -v -m1 '\.\.\.$' | sed 's/^sim_scale: //; s/|/\//g' || true)"
      python3 -c 'import json,sys; print(json.dumps({"ranks": int(sys.argv[1]), "mode": sys.argv[2], "failed": True, "why": sys.argv[3]}))' \
        "$n" "$mode" "$why" >>"$results"
    fi
  done
done

PYTHONPATH=scripts python3 - "$results" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
from bench_timing import machine_line
results, before, after = sys.argv[1], sys.argv[2], sys.argv[3]
print(machine_line(f"load average {before} before, {after} after"))
print()
print("| ranks | nodes | mode | join s | connect s | barrier s | broadcast s | all-to-all s | teardown s "
      "| launcher CPU µs/rank (connect, barrier, broadcast, all-to-all) | launcher bytes/rank | log lines |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(results):
    r = json.loads(line)
    if r.get("failed"):
        print(f"| {r['ranks']} | {r['ranks'] // 8} | {r['mode']} | did not complete: {r.get('why') or 'see the run output'} |||||||||")
        continue
    p, n = r["phases"], r["ranks"]
    wall = lambda k: f"{p[k]['wall_s']:.3f}" if k in p else "skipped"
    cpu = lambda k: f"{p[k]['launcher_cpu_s'] / n * 1e6:.0f}" if k in p else "-"
    print(f"| {n} | {r['nodes']} | {r['mode']} | {wall('join')} | {wall('connect')} | {wall('barrier')} "
          f"| {wall('broadcast')} | {wall('alltoall')} | {wall('teardown')} "
          f"| {cpu('connect')}, {cpu('barrier')}, {cpu('broadcast')}, {cpu('alltoall')} "
          f"| {r['bytes_per_rank']:.0f} | {r['log_lines']} |")
PY
