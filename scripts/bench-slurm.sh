#!/usr/bin/env bash
# Start-up of a 2-node job with agents started by srun against the same job over SSH, on the same
# nodes, in the same run: a real Slurm (scripts/slurm-cluster.sh) on the namespaced test cluster
# (scripts/netns-cluster.sh), whose nodes run both slurmd and sshd.
#
#   scripts/bench-slurm.sh [runs]     (default 10 per launcher; needs root)
#
# Inside ONE allocation (`salloc --nodes=2`), the two launchers alternate, run after run:
#   dslaunch --launcher slurm --nproc_per_node 2 --no_python rank-hello
#   dslaunch --launcher ssh   --nproc_per_node 2 --no_python rank-hello   (the allocation's nodes over SSH)
# Each run: every rank meets the others at a store barrier, then the job ends; wall time of the
# launcher from exec to exit (pre-flight, agents, workers, barrier, teardown). Median and spread.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
export DSLAUNCH_CLUSTER_DIR="${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-bench-cluster}"
export DSLAUNCH_SLURM_DIR="${DSLAUNCH_SLURM_DIR:-/tmp/dslaunch-bench-slurm}"
trap 'scripts/slurm-cluster.sh down >/dev/null 2>&1 || true; scripts/netns-cluster.sh down >/dev/null 2>&1 || true' EXIT
scripts/netns-cluster.sh up 2 2 >/dev/null
scripts/slurm-cluster.sh up 2 >/dev/null
export SLURM_CONF="$DSLAUNCH_SLURM_DIR/slurm.conf"

# The measurement runs inside the allocation; salloc's own start-up is not part of it.
salloc --nodes=2 --quiet python3 - "$runs" "$DSLAUNCH_CLUSTER_DIR" "$PWD" <<'PY'
import os, statistics, subprocess, sys, tempfile, time
runs, state, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
bin_ = f"{root}/build/bin"
logs = tempfile.mkdtemp()
common = [f"{bin_}/dslaunch", "--log_dir", logs, "--nproc_per_node", "2"]
ssh = ["--launcher", "ssh", "--ssh_identity", f"{state}/id_ed25519", "--ssh_known_hosts", f"{state}/known_hosts"]
srun = ["--launcher", "slurm"]
prog = ["--no_python", f"{bin_}/rank-hello"]

def once(options):
    t = time.perf_counter()
    p = subprocess.run(common + options + prog, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=logs)
    dt = time.perf_counter() - t
    if p.returncode != 0 or p.stdout.decode().count("met 4 ranks") != 4:
        sys.exit(f"failed ({p.returncode}): {' '.join(options)}\n{p.stderr.decode()[-2000:]}")
    return dt

once(srun), once(ssh)  # warm-up: page cache, slurmd's first step, sshd's first login
times = {"srun": [], "ssh": []}
for i in range(runs):
    for name, options in (("srun", srun), ("ssh", ssh)) if i % 2 == 0 else (("ssh", ssh), ("srun", srun)):
        times[name].append(once(options))
nodes = os.environ.get("SLURM_JOB_NODELIST", "?")
print(f"machine: {os.cpu_count()} cores; date: {time.strftime('%Y-%m-%d')}; Slurm job {os.environ.get('SLURM_JOB_ID')} "
      f"on {nodes}; {runs} runs each, alternating")
print("| launcher | median ms | min ms | max ms |")
print("|---|---|---|---|")
for name in ("srun", "ssh"):
    t = times[name]
    print(f"| {name} | {statistics.median(t)*1e3:.0f} | {min(t)*1e3:.0f} | {max(t)*1e3:.0f} |")
print(f"srun / ssh (medians): {statistics.median(times['srun']) / statistics.median(times['ssh']):.2f}")
PY
