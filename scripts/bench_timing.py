"""Shared by the start-up benchmarks (scripts/bench-launch.sh, scripts/bench-container.sh): timing
commands alternately, so that each sees the same machine load, and the table rows of
docs/benchmarks.md. Imported with PYTHONPATH=scripts."""
import os
import statistics
import subprocess
import sys
import time


def run_once(cmd, cwd):
    """Wall time of one run of `cmd`; exits the benchmark if it fails."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()}")
    return dt


def measure(cmds, runs, cwd, warmup=2):
    """Runs the commands alternately, `warmup` rounds untimed; the times of each, in seconds."""
    times = [[] for _ in cmds]
    for i in range(warmup + runs):
        for t, cmd in zip(times, cmds):
            dt = run_once(cmd, cwd)
            if i >= warmup:
                t.append(dt)
    return times


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def machine_line(extra=""):
    """'machine: N cores, CPU[; extra]; date: YYYY-MM-DD'."""
    return f"machine: {os.cpu_count()} cores, {cpu_model()}{'; ' + extra if extra else ''}; date: {time.strftime('%Y-%m-%d')}"


def row(name, t):
    """A table row: name, runs, median, min, max (ms)."""
    return f"| {name} | {len(t)} | {statistics.median(t)*1e3:.1f} | {min(t)*1e3:.1f} | {max(t)*1e3:.1f} |"
