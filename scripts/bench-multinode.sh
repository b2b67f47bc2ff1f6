#!/usr/bin/env bash
# Multi-node launch and teardown on the namespaced test cluster (scripts/netns-cluster.sh), with
# plain sequential ssh and pdsh starting the same per-node command in the same run.
#
#   scripts/bench-multinode.sh [runs]     (default 5 per configuration; needs root)
#
# 1. Start-up: wall time of `dslaunch -H hosts --no_python rank-hello` (every rank meets the others
#    at a store barrier, then the job ends) for 1, 2, 4, 8 nodes x 4 slots; next to it, `ssh` to
#    each node in turn and `pdsh` on all nodes, running `true`.
# 2. Teardown: on 4 nodes x 4 slots, one rank kills itself with SIGKILL; the time from its death
#    to the launcher's exit (which follows the report of every other worker's end).
#
# DSLAUNCH_BASELINE_BIN=/path/to/an/older/build/bin adds that build's dslaunch (with its own agent
# and rank-hello), run alternately with this one in both parts, and prints the ratio of their
# medians; the ssh and pdsh columns are then left out.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null
export DSLAUNCH_CLUSTER_DIR="${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-bench-cluster}"
trap 'scripts/netns-cluster.sh down >/dev/null 2>&1 || true' EXIT
scripts/netns-cluster.sh up 8 4 >/dev/null

python3 - "$runs" "$DSLAUNCH_CLUSTER_DIR" "$PWD" "${DSLAUNCH_BASELINE_BIN:-}" <<'PY'
import os, statistics, subprocess, sys, tempfile, time
runs, state, root, baseline = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
key, known = f"{state}/id_ed25519", f"{state}/known_hosts"
hosts = [l.split()[0] for l in open(f"{state}/hostfile") if l.strip() and not l.startswith("#")]
ssh_opts = ["-i", key, "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes"]
logs = tempfile.mkdtemp()

def run_ok(cmd, env=None):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=logs)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()[-2000:]}")
    return time.perf_counter() - t

def timed(cmds, env=None, warmup=1):
    """Runs the commands alternately; the median wall time of each."""
    out = [[] for _ in cmds]
    for i in range(warmup + runs):
        for o, cmd in zip(out, cmds):
            dt = run_ok(cmd, env)
            if i >= warmup:
                o.append(dt)
    return [statistics.median(o) for o in out]

def hostfile(n):
    path = f"{logs}/hosts{n}"
    with open(path, "w") as f:
        for h in hosts[:n]:
            f.write(f"{h} slots=4\n")
    return path

def launcher(bin_dir):
    return [f"{bin_dir}/dslaunch", "--ssh_identity", key, "--ssh_known_hosts", known, "--log_dir", logs]

bins = [f"{root}/build/bin"] + ([os.path.abspath(baseline)] if baseline else [])
pdsh_env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND=" ".join(ssh_opts))
print(f"machine: {os.cpu_count()} cores; date: {time.strftime('%Y-%m-%d')}; median of {runs} runs")
if baseline:
    print(f"| nodes x slots | dslaunch (rank-hello, barrier) ms | baseline {baseline} ms | dslaunch / baseline |")
    print("|---|---|---|---|")
else:
    print("| nodes x slots | dslaunch (rank-hello, barrier) ms | sequential ssh `true` ms | pdsh `true` ms | pdsh / dslaunch |")
    print("|---|---|---|---|---|")
for n in (1, 2, 4, 8):
    ds = timed([launcher(b) + ["--hostfile", hostfile(n), "--no_python", f"{b}/rank-hello"] for b in bins])
    if baseline:
        print(f"| {n} x 4 | {ds[0]*1e3:.0f} | {ds[1]*1e3:.0f} | {ds[0]/ds[1]:.3f} |")
        continue
    seq = timed([["/bin/sh", "-c", " && ".join(["ssh " + " ".join(ssh_opts) + f" {h} true" for h in hosts[:n]])]])[0]
    pd = timed([["pdsh", "-w", ",".join(hosts[:n]), "true"]], env=pdsh_env)[0]
    print(f"| {n} x 4 | {ds[0]*1e3:.0f} | {seq*1e3:.0f} | {pd*1e3:.0f} | {pd/ds[0]:.2f} |")

# Teardown: rank 5 (node 1) kills itself after the barrier; the others hang until stopped.
tear = [[] for _ in bins]
for i in range(runs):
    for t, b in zip(tear, bins):
        death = f"{logs}/death"
        if os.path.exists(death):
            os.remove(death)
        p = subprocess.run(launcher(b) + ["--hostfile", hostfile(4), "--grace_period", "5", "--no_python",
                                          f"{b}/env_check", "--kill_rank", "5", "--death_file", death],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=logs)
        end = time.time_ns()
        if p.returncode != 137:
            sys.exit(f"teardown run exited {p.returncode}, expected 137\n{p.stderr.decode()[-2000:]}")
        t.append((end - int(open(death).read())) / 1e6)
for name, t in zip(["dslaunch"] + (["baseline"] if baseline else []), tear):
    print(f"\nteardown across 4 nodes x 4 slots, {name} (worker SIGKILL -> launcher exit, all workers stopped): "
          f"median {statistics.median(t):.0f} ms, max {max(t):.0f} ms over {runs} runs")
if baseline:
    print(f"\nteardown dslaunch / baseline median ratio: {statistics.median(tear[0]) / statistics.median(tear[1]):.3f}")
PY
