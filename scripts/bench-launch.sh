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
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null

runs_dslaunch="${1:-30}"
baseline="${DSLAUNCH_BASELINE:-}"
runs_torchrun="${2:-$([[ -n "$baseline" ]] && echo 0 || echo 5)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

python3 - "$runs_dslaunch" "$runs_torchrun" "$logs" "$baseline" <<'PY'
import os, platform, statistics, subprocess, sys, time
runs_ds, runs_tr, logs, baseline = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def run_once(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=logs)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()}")
    return dt

def measure(cmds, runs, warmup=2):
    """Runs the commands alternately, so that each sees the same machine load."""
    times = [[] for _ in cmds]
    for i in range(warmup + runs):
        for t, cmd in zip(times, cmds):
            dt = run_once(cmd)
            if i >= warmup:
                t.append(dt)
    return times

def ds_cmd(binary):
    # Its own log directory per build: a job id must not repeat within one (docs/launcher.md).
    d = os.path.join(logs, str(abs(hash(binary))))
    return [binary, "--log_dir", d, "--nproc_per_node", "8", "--no_python", "/bin/true"]

builds = [os.path.abspath("build/bin/dslaunch")] + ([os.path.abspath(baseline)] if baseline else [])
measured = measure([ds_cmd(b) for b in builds], runs_ds)
ds = measured[0]
# Debian's torchrun on Python 3.11 needs explicit --redirects/--tee (its default trips on an enum change).
tr = measure([["torchrun", "--no_python", "--nproc_per_node", "8", "--redirects", "2", "--tee", "2",
               "--log_dir", logs + "/torchrun", "/bin/true"]], runs_tr, warmup=1)[0] if runs_tr > 0 else []
md = statistics.median(ds)
cpu = "?"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
print(f"machine: {os.cpu_count()} cores, {cpu}; date: {time.strftime('%Y-%m-%d')}")
print("| launcher | runs | median (ms) | min (ms) | max (ms) |")
print("|---|---|---|---|---|")
print(f"| dslaunch --nproc_per_node 8 --no_python /bin/true | {len(ds)} | {md*1e3:.1f} | {min(ds)*1e3:.1f} | {max(ds)*1e3:.1f} |")
if baseline:
    bs = measured[1]
    mb = statistics.median(bs)
    print(f"| baseline {baseline} | {len(bs)} | {mb*1e3:.1f} | {min(bs)*1e3:.1f} | {max(bs)*1e3:.1f} |")
if tr:
    mt = statistics.median(tr)
    print(f"| torchrun --no_python --nproc_per_node 8 /bin/true | {len(tr)} | {mt*1e3:.1f} | {min(tr)*1e3:.1f} | {max(tr)*1e3:.1f} |")
if baseline:
    print(f"\ndslaunch / baseline median ratio: {md/mb:.3f}")
if tr:
    print(f"\ntorchrun / dslaunch median ratio: {mt/md:.1f}x")
PY
