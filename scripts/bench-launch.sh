#!/usr/bin/env bash
# Launch overhead: wall time from start to exit of 8 local ranks of /bin/true, dslaunch against
# torchrun (Debian's python3-torch), measured in the same run. Prints a Markdown table row set for
# docs/benchmarks.md.
#
#   scripts/bench-launch.sh [dslaunch runs] [torchrun runs]     (defaults 30 and 5)
#
# DSLAUNCH_BASELINE=/path/to/an/older/dslaunch adds that build, run alternately with this one (so
# both see the same machine load), and prints the ratio of their medians; torchrun runs 0 times
# then, unless asked for.
#
# DSLAUNCH_BENCH_STATUS=1 adds this build with --status_port 0 (the live page's server on its own
# thread, docs/observability.md), run alternately with the plain one, and prints the ratio of their
# medians; torchrun runs 0 times then too, unless asked for.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null

runs_dslaunch="${1:-30}"
baseline="${DSLAUNCH_BASELINE:-}"
status="${DSLAUNCH_BENCH_STATUS:-}"
runs_torchrun="${2:-$([[ -n "$baseline" || -n "$status" ]] && echo 0 || echo 5)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

PYTHONPATH=scripts python3 - "$runs_dslaunch" "$runs_torchrun" "$logs" "$baseline" "$status" <<'PY'
import os, statistics, sys
runs_ds, runs_tr, logs, baseline, status = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

from bench_timing import machine_line, measure, row

def ds_cmd(binary, extra=()):
    # Its own log directory per command: a job id must not repeat within one (docs/launcher.md).
    d = os.path.join(logs, str(abs(hash((binary,) + tuple(extra)))))
    return [binary, *extra, "--log_dir", d, "--nproc_per_node", "8", "--no_python", "/bin/true"]

builds = [os.path.abspath("build/bin/dslaunch")] + ([os.path.abspath(baseline)] if baseline else [])
cmds = [ds_cmd(b) for b in builds]
if status:
    cmds.append(ds_cmd(builds[0], ["--status_port", "0"]))
measured = measure(cmds, runs_ds, logs)
ds = measured[0]
# Debian's torchrun on Python 3.11 needs explicit --redirects/--tee (its default trips on an enum change).
tr = measure([["torchrun", "--no_python", "--nproc_per_node", "8", "--redirects", "2", "--tee", "2",
               "--log_dir", logs + "/torchrun", "/bin/true"]], runs_tr, logs, warmup=1)[0] if runs_tr > 0 else []
md = statistics.median(ds)
print(machine_line())
print("| launcher | runs | median (ms) | min (ms) | max (ms) |")
print("|---|---|---|---|---|")
print(row("dslaunch --nproc_per_node 8 --no_python /bin/true", ds))
if baseline:
    bs = measured[1]
    mb = statistics.median(bs)
    print(row(f"baseline {baseline}", bs))
if status:
    st = measured[-1]
    print(row("dslaunch --status_port 0 --nproc_per_node 8 --no_python /bin/true", st))
if tr:
    mt = statistics.median(tr)
    print(row("torchrun --no_python --nproc_per_node 8 /bin/true", tr))
if status:
    print(f"\nwith --status_port 0 / without, median ratio: {statistics.median(st)/md:.3f}")
if baseline:
    print(f"\ndslaunch / baseline median ratio: {md/mb:.3f}")
if tr:
    print(f"\ntorchrun / dslaunch median ratio: {mt/md:.1f}x")
PY
