#!/usr/bin/env bash
# Start-up inside a container: wall time from start to exit of 8 local ranks of /bin/true run by
# the image's dslaunch (`podman run --rm IMAGE --nproc_per_node 8 --no_python /bin/true`) against
# the same job run by this tree's build/bin/dslaunch outside it, alternating in the same run, and
# `podman run --rm IMAGE --version` (the container's own cost, no job) so that the launcher's share
# is visible, and the job with `--network host` (what the container's own network costs). Prints a Markdown table for docs/benchmarks.md. Needs root and podman.
#
#   scripts/bench-container.sh [runs]          (default 20, after 2 warm-up runs of each)
#
# The image is $DSLAUNCH_IMAGE (default localhost/dslaunch:latest), built by
# scripts/build-image.sh when it does not exist.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
image="${DSLAUNCH_IMAGE:-localhost/dslaunch:latest}"
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
if ! podman image exists "$image"; then
  scripts/build-image.sh --tag "$image" >/dev/null
fi
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

PYTHONPATH=scripts python3 - "$runs" "$logs" "$image" <<'PY'
import os, statistics, subprocess, sys
runs, logs, image = int(sys.argv[1]), sys.argv[2], sys.argv[3]

from bench_timing import machine_line, measure, row

job = ["--nproc_per_node", "8", "--no_python", "/bin/true"]
cmds = [
    # Inside: the image's dslaunch as PID 1, its log directory in the container's /tmp.
    ["podman", "run", "--rm", image] + job,
    # Outside: the same job, the same launcher code built on the host.
    [os.path.abspath("build/bin/dslaunch"), "--log_dir", os.path.join(logs, "host")] + job,
    # The container alone: create, start, run dslaunch --version, tear down.
    ["podman", "run", "--rm", image, "--version"],
    # The same without a network namespace of its own (no bridge, no veth pair to set up).
    ["podman", "run", "--rm", "--network", "host", image] + job,
]
names = [
    f"`podman run --rm IMAGE --nproc_per_node 8 --no_python /bin/true`",
    f"`dslaunch --nproc_per_node 8 --no_python /bin/true` (host)",
    f"`podman run --rm IMAGE --version`",
    f"`podman run --rm --network host IMAGE --nproc_per_node 8 --no_python /bin/true`",
]
times = measure(cmds, runs, logs)
podman = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.strip()
print(machine_line(f"{podman}; image {image}"))
print("| command | runs | median (ms) | min (ms) | max (ms) |")
print("|---|---|---|---|---|")
for name, t in zip(names, times):
    print(row(name, t))
inside, outside, bare, host_net = (statistics.median(t) for t in times)
print(f"\ncontainer job - host job: {(inside - outside)*1e3:.1f} ms; "
      f"container job - bare container: {(inside - bare)*1e3:.1f} ms (the launcher's share inside)")
PY
