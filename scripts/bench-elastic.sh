#!/usr/bin/env bash
# Recovery time: from a fault to the first completed step of the next generation, broken down,
# on the namespaced test cluster (scripts/netns-cluster.sh), median of several runs. Prints
# Markdown for docs/benchmarks.md.
#
#   scripts/bench-elastic.sh [runs] [parts]   (default 3 per case, parts "recovery,training,python";
#                                              needs root)
#
# 1. The bundled runtime (configs/gpt-demo.json's model and data, a checkpoint every 10 steps) on
#    2 nodes x 1 rank: (a) rank 1 killed with SIGKILL at step 12, restarted on the same nodes;
#    (b) node 1's link cut at step 12 (heartbeat timeout 3 s), replaced by the spare node 2.
#    Breakdown from the launcher's --events_file and rank 0's metrics.jsonl: detect (fault ->
#    the launcher's "fault" event), stop (-> "generation_end"), decide (-> next "generation_start"),
#    start (-> the worker's start), rendezvous (-> its communicator ready), load (the checkpoint,
#    or the in-memory snapshot), first step (the rest, to the first completed step), and the steps
#    lost (done before the fault, not in what was restored). Each case twice, alternating: with
#    in-memory snapshots every step (the default with --max_restarts) and with
#    checkpoint.snapshot_interval 0 (the disk only).
# 2. Training with in-memory snapshots copied to a peer node: the same model on 2 nodes x 1 rank,
#    40 steps, alternating: snapshots every step each copied to the other node (the default),
#    snapshots without copies (checkpoint.snapshot_replicas 0), none (snapshot_interval 0).
#    Tokens/s (median of steps 6-40), snapshots taken (the rest waited for the copy of the last:
#    snapshot_deferred), and the snapshot memory node 0's agent holds at step 30 (its own slots and
#    the copies it keeps for node 1: the distinct memory files under /proc/PID/fd).
# 3. The same kill on a stdlib-only Python worker (one step every 100 ms, no collective), 2 ranks
#    on this machine, under dslaunch --max_restarts 1 and under torchrun --standalone
#    --max_restarts 1 (Debian's python3-torch), in the same run: fault -> first step of the
#    restart. (torchrun's c10d rendezvous across the namespaced nodes did not come up here; a
#    link-down case is not measured for torchrun: its agents do not restart the survivors.)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
parts="${2:-recovery,training,python}"
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null
[[ -f data/fortunes.train.bin && -f data/fortunes.val.bin ]] || scripts/prepare-data.sh >/dev/null
export DSLAUNCH_CLUSTER_DIR="${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-bench-cluster}"
trap 'ip link set dslv1 up 2>/dev/null || true; scripts/netns-cluster.sh down >/dev/null 2>&1 || true' EXIT
scripts/netns-cluster.sh up 3 1 >/dev/null

python3 - "$runs" "$DSLAUNCH_CLUSTER_DIR" "$PWD" "$parts" <<'PY'
import json, os, re, signal, statistics, subprocess, sys, tempfile, time
runs, state, root, parts = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(",")
key, known = f"{state}/id_ed25519", f"{state}/known_hosts"
hosts = [l.split()[0] for l in open(f"{state}/hostfile") if l.strip() and not l.startswith("#")]
bin_ = f"{root}/build/bin"
now_ms = lambda: int(time.time() * 1000)

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""

def wait_for(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    sys.exit(f"timed out waiting for {what}")

def worker_pid(job, rank, generation=0):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        env = read(f"/proc/{pid}/environ").split("\0")
        if f"DSLAUNCH_JOB_ID={job}" in env and f"RANK={rank}" in env and f"DSLAUNCH_RESTART_COUNT={generation}" in env \
                and "dslaunch-worker" in read(f"/proc/{pid}/cmdline"):
            return int(pid)
    return None

def agent_pid(job, node):
    for pid in os.listdir("/proc"):
        if pid.isdigit() and "dslaunch-agent" in read(f"/proc/{pid}/cmdline") and job in read(f"/proc/{pid}/cmdline") \
                and f"--node_rank\0{node}\0" in read(f"/proc/{pid}/cmdline"):
            return int(pid)
    return None

# Bytes of the distinct in-memory snapshot files process `pid` holds (its own slots, its copies).
def snapshot_memory(pid):
    seen, total = set(), 0
    for fd in os.listdir(f"/proc/{pid}/fd") if pid else []:
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:dslaunch-snapshot"):
                continue
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_size
    return total

def last_step(metrics):
    steps = [int(m) for m in re.findall(r'"event":"step","step":(\d+)', read(metrics))]
    return max(steps) if steps else -1

demo = json.load(open(f"{root}/configs/gpt-demo.json"))
def runtime_case(kind, run, snapshots, steps=24, extra=None):
    d = tempfile.mkdtemp(prefix="bench-elastic-")
    cfg = dict(demo)
    cfg["data"] = {"train": f"{root}/data/fortunes.train.bin", "val": f"{root}/data/fortunes.val.bin"}
    cfg["train"] = {"steps": steps, "eval_interval": 0, "eval_steps": 1}
    cfg["checkpoint"] = {"dir": f"{d}/ckpt", "interval": 10}
    if not snapshots:
        cfg["checkpoint"]["snapshot_interval"] = 0  # else every step (the default with --max_restarts)
    cfg["checkpoint"].update(extra or {})
    with open(f"{d}/train.json", "w") as f:
        json.dump(cfg, f)
    with open(f"{d}/hosts", "w") as f:
        f.write("".join(f"{h} slots=1\n" for h in hosts[:3]))
    job = f"bench-{kind}-{run}"
    events = f"{d}/events.jsonl"
    cmd = [f"{bin_}/dslaunch", "--hostfile", f"{d}/hosts", "--ssh_identity", key, "--ssh_known_hosts", known,
           "--log_dir", f"{d}/logs", "--job_id", job, "--events_file", events, "--heartbeat_timeout", "3",
           "--grace_period", "5", "--max_restarts", "1", "--nnodes", "2:2", f"{d}/train.json"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=d)
    metrics = f"{d}/logs/{job}/metrics.jsonl"
    if kind == "train":
        wait_for(lambda: last_step(metrics) >= 30, 300, "step 30")
        held = snapshot_memory(agent_pid(job, 0))
        err = p.communicate(timeout=600)[1].decode()
        if p.returncode != 0:
            sys.exit(f"{kind}: dslaunch failed ({p.returncode}):\n{err[-3000:]}")
        recs = [json.loads(l) for l in read(metrics).splitlines() if l.startswith("{")]
        step_recs = [r for r in recs if r.get("event") == "step"]
        rates = [r["tokens_per_s"] for r in step_recs if r["step"] > 5]
        taken = sum(1 for r in step_recs if "snapshot_ms" in r)
        subprocess.run(["rm", "-rf", d])
        return {"tokens/s": statistics.median(rates), "taken": taken, "steps": len(step_recs), "MiB": held / 2**20}
    wait_for(lambda: last_step(metrics) >= 12, 300, "step 12")
    if kind == "crash":
        pid = wait_for(lambda: worker_pid(job, 1), 10, "rank 1")
        t0 = now_ms()
        os.kill(pid, signal.SIGKILL)
    else:
        t0 = now_ms()
        subprocess.run(["ip", "link", "set", "dslv1", "down"], check=True)
    err = p.communicate(timeout=600)[1].decode()
    if kind != "crash":
        subprocess.run(["ip", "link", "set", "dslv1", "up"], check=True)
    if p.returncode != 0:
        sys.exit(f"{kind}: dslaunch failed ({p.returncode}):\n{err[-3000:]}")
    ev = [json.loads(l) for l in read(events).splitlines()]
    t = lambda name, g: next(e["t_ms"] for e in ev if e["event"] == name and e["generation"] == g)
    recs = [json.loads(l) for l in read(metrics).splitlines() if l.startswith("{")]
    gen1 = next(r for r in recs if r.get("event") == "generation" and r.get("generation") == 1)
    resume = [r for r in recs if r.get("event") == "resume"][-1]
    load = resume["load_seconds"] * 1e3
    # Steps lost: the newest step generation 0 completed, less the step generation 1 resumed at.
    gen0_steps = [r["step"] for r in recs[:recs.index(resume)] if r.get("event") == "step"]
    parts = {
        "detect": t("fault", 0) - t0,
        "stop": t("generation_end", 0) - t("fault", 0),
        "decide": t("generation_start", 1) - t("generation_end", 0),
        "start": gen1["started_ms"] - t("generation_start", 1),
        "rendezvous": gen1["rendezvous_ms"] - gen1["started_ms"],
        "load": load,
        "first step": gen1["first_step_ms"] - gen1["rendezvous_ms"] - load,
        "total": gen1["first_step_ms"] - t0,
        "steps lost": max(gen0_steps) - resume["step"],
        "from": resume.get("source", "disk"),
    }
    subprocess.run(["rm", "-rf", d])
    return parts

PYWORKER = r'''
import os, sys, time, signal
gen = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
rank = int(os.environ["RANK"])
out = sys.argv[1]
for step in range(1, 1000):
    time.sleep(0.1)
    with open(f"{out}/gen{gen}.rank{rank}.steps", "a") as f:
        f.write(f"{step} {int(time.time()*1000)}\n")
    if gen == 0 and rank == 1 and step == 12:
        with open(f"{out}/killed", "w") as f:
            f.write(str(int(time.time()*1000)))
        os.kill(os.getpid(), signal.SIGKILL)
    if gen == 1 and step == 3:
        break
'''

def script_case(launcher, run):
    d = tempfile.mkdtemp(prefix="bench-elastic-py-")
    with open(f"{d}/worker.py", "w") as f:
        f.write(PYWORKER)
    if launcher == "dslaunch":
        cmd = [f"{bin_}/dslaunch", "--nproc_per_node", "2", "--log_dir", f"{d}/logs", "--max_restarts", "1",
               "--grace_period", "5", "--python", "/usr/bin/python3", "--no_local_rank", f"{d}/worker.py", d]
    else:
        cmd = ["/usr/bin/torchrun", "--standalone", "--nproc_per_node", "2", "--max_restarts", "1",
               "--redirects", "2", "--tee", "2", "--no_python", "/usr/bin/python3", f"{d}/worker.py", d]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=d, timeout=600)
    if p.returncode != 0:
        sys.exit(f"{launcher}: failed ({p.returncode}):\n{p.stderr.decode()[-3000:]}")
    killed = int(read(f"{d}/killed"))
    first = min(int(read(f"{d}/gen1.rank{r}.steps").split()[1]) for r in range(2))
    subprocess.run(["rm", "-rf", d])
    return first - killed

print(f"machine: {os.cpu_count()} cores; date: {time.strftime('%Y-%m-%d')}; median of {runs} runs; ms")
cols = ["detect", "stop", "decide", "start", "rendezvous", "load", "first step", "total", "steps lost"]
if "recovery" in parts:
    print("| bundled runtime, gpt-demo | restored from | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
for kind, label in () if "recovery" not in parts else (("crash", "worker SIGKILL, same nodes"), ("linkdown", "node link down, spare joins (heartbeat timeout 3 s)")):
    # Snapshots in memory every step, and checkpoints on disk every 10 steps only, alternating.
    results = {True: [], False: []}
    for i in range(runs):
        for snapshots in (True, False):
            results[snapshots].append(runtime_case(kind, i, snapshots))
    for snapshots in (True, False):
        med = {c: statistics.median(r[c] for r in results[snapshots]) for c in cols}
        source = "/".join(sorted({r["from"] for r in results[snapshots]}))
        what = "snapshots every step" if snapshots else "disk only (snapshot_interval 0)"
        print(f"| {label}, {what} | {source} | " + " | ".join(f"{med[c]:.0f}" for c in cols) + " |")
modes = (("snapshots every step, copied to 1 peer node", True, {}),
         ("snapshots every step, no copies (snapshot_replicas 0)", True, {"snapshot_replicas": 0}),
         ("no snapshots (snapshot_interval 0)", False, {}))
if "training" in parts:
    train = {label: [] for label, _, _ in modes}
    for i in range(runs):
        for label, snapshots, extra in modes:
            train[label].append(runtime_case("train", i, snapshots, steps=40, extra=extra))
    base = statistics.median(r["tokens/s"] for r in train[modes[-1][0]])
    print()
    print("| gpt-demo, 2 nodes x 1 rank, 40 steps | tokens/s | vs none | snapshots taken | snapshot memory, node 0, MiB |")
    print("|---|---|---|---|---|")
    for label, _, _ in modes:
        rs = train[label]
        tps = statistics.median(r["tokens/s"] for r in rs)
        print(f"| {label} | {tps:.0f} | {tps / base:.3f}x | {statistics.median(r['taken'] for r in rs):.0f} of "
              f"{rs[0]['steps']} | {statistics.median(r['MiB'] for r in rs):.1f} |")
if "python" not in parts:
    sys.exit(0)
ds = [script_case("dslaunch", i) for i in range(runs)]
tr = [script_case("torchrun", i) for i in range(runs)]
print()
print("| Python worker, SIGKILL of rank 1 of 2 (one node) | fault -> first step of the restart, ms |")
print("|---|---|")
print(f"| dslaunch --max_restarts 1 | {statistics.median(ds):.0f} |")
print(f"| torchrun --max_restarts 1 | {statistics.median(tr):.0f} |")
print(f"| ratio torchrun / dslaunch | {statistics.median(tr)/statistics.median(ds):.1f} |")
PY
