#!/usr/bin/env bash
# Step time of one model trained four ways, side by side in one run (docs/offload.md,
# docs/benchmarks.md "Offload"): in memory, optimizer state on NVMe, optimizer state and
# parameters on NVMe, and in memory with activation recomputation; with the swap traffic per step
# (the worker's own storage I/O, /proc/PID/io) and the time the disk needs for it at the swap
# ring's read-modify-write rate measured in the same run (swap_bench), against the time offload
# adds to the step (below 1: part of the I/O overlaps the update; 1: disk-bound at the ring's
# rate), and the yardsticks of scripts/bench-offload-io.sh (STREAM triad, the bundled AdamW
# against torch's). Prints Markdown. The losses of the four must be identical, or it fails.
#
#   scripts/bench-offload.sh [DIR] [STEPS]   (default /var/tmp, 6 steps; the model: configs/gpt-bench.json
#                                             at bf16, ZeRO stage 3, one rank)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/var/tmp}"
steps="${2:-6}"
(( steps >= 4 )) || { echo "STEPS must be at least 4" >&2; exit 2; }
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
ninja -C build swap_bench optimizer_bench >/dev/null
[[ -f data/fortunes.train.bin ]] || scripts/prepare-data.sh >/dev/null
work="$(mktemp -d "$dir/dslaunch-bench-offload-XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "== yardsticks (scripts/bench-offload-io.sh $dir 512)"
scripts/bench-offload-io.sh "$dir" 512 | tee "$work/yardsticks.txt" | grep -v '^|' || true

python3 - "$work" "$steps" <<'PY'
import datetime, json, os, platform, re, statistics, subprocess, sys, time
work, steps = sys.argv[1], int(sys.argv[2])
base = json.load(open("configs/gpt-bench.json"))
cfg_dir = os.path.abspath("configs")
for k in ("train", "val"):
    base["data"][k] = os.path.normpath(os.path.join(cfg_dir, base["data"][k]))
base["bf16"] = {"enabled": True}
base["zero_optimization"] = {"stage": 3, "sub_group_size": 1_000_000, "stage3_param_persistence_threshold": 0}
base["train"] = {"steps": steps, "eval_interval": 0, "eval_steps": 1, "sample_tokens": 0}
base["steps_per_print"] = 1
swap = os.path.join(work, "swap")
os.makedirs(swap)
variants = {
    "in memory": {},
    "optimizer on NVMe": {"offload_optimizer": {"device": "nvme", "nvme_path": swap}},
    "optimizer + parameters on NVMe": {"offload_optimizer": {"device": "nvme", "nvme_path": swap},
                                        "offload_param": {"device": "nvme", "nvme_path": swap, "max_in_cpu": 0}},
    "recomputation (in memory)": {"activation_checkpointing": {}},
}

def io_of(pid):
    try:
        fields = dict(l.split(": ") for l in open(f"/proc/{pid}/io").read().split("\n") if l)
        return int(fields["read_bytes"]), int(fields["write_bytes"])
    except OSError:
        return None

def worker_of(pid):
    """The dslaunch-worker under dslaunch `pid` (dslaunch -> dslaunch-agent -> worker), or None."""
    try:
        agents = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        for a in agents:
            for w in subprocess.run(["pgrep", "-P", a], capture_output=True, text=True).stdout.split():
                if "dslaunch-worker" in open(f"/proc/{w}/cmdline").read():
                    return int(w)
    except OSError:
        pass
    return None

rows = []
for name, extra in variants.items():
    c = json.loads(json.dumps(base))
    for k, v in extra.items():
        (c["zero_optimization"] if k.startswith("offload") else c)[k] = v
    path = os.path.join(work, name.split()[0] + str(len(rows)) + ".json")
    json.dump(c, open(path, "w"))
    job = f"offload-bench-{len(rows)}"
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    p = subprocess.Popen([os.path.abspath("build/bin/dslaunch"), "--log_dir", work, "--job_id", job,
                          "--nproc_per_node", "1", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
    # The worker's storage I/O when step 1 is recorded and when step N-1 is (the worker may be gone
    # by the time step N's record is read): the traffic of steps 2..N-1, after the swap files were
    # filled.
    worker, marks, last = None, {}, steps - 1
    metrics_path = os.path.join(work, job, "metrics.jsonl")
    while p.poll() is None:
        worker = worker or worker_of(p.pid)
        if worker and os.path.exists(metrics_path):
            done = open(metrics_path).read().count('"event":"step"')
            io = io_of(worker)
            if io and done >= 1 and 1 not in marks:
                marks[1] = io
            if io and done >= last and last not in marks:
                marks[last] = io
        time.sleep(0.02)
    out = p.stdout.read()
    if p.returncode != 0:
        sys.exit(f"{name}: dslaunch exited {p.returncode}:\n{out}")
    recs = [json.loads(l) for l in open(os.path.join(work, job, "metrics.jsonl"))]
    start = next(r for r in recs if r["event"] == "start")
    step_recs = [r for r in recs if r["event"] == "step"]
    ms = statistics.median(r["ms_per_step"] for r in step_recs[1:])  # the first step warms up
    psi = start["parameters"]
    mem = start["bytes_per_rank"]
    if 1 not in marks or last not in marks:
        sys.exit(f"{name}: the worker's I/O was not sampled at steps 1 and {last}")
    reads = (marks[last][0] - marks[1][0]) / (last - 1)
    writes = (marks[last][1] - marks[1][1]) / (last - 1)
    rows.append(dict(name=name, ms=ms, psi=psi, mem=mem, reads=reads, writes=writes,
                     losses=[r["loss"] for r in step_recs]))
    print(f"{name}: {ms:.0f} ms/step, storage read {reads / 1e6:.0f} MB, written {writes / 1e6:.0f} MB per step",
          file=sys.stderr)

y = open(os.path.join(work, "yardsticks.txt")).read()
def rate(label):
    m = re.search(re.escape(label) + r"\s+([0-9.]+) GB/s", y)
    return float(m.group(1)) if m else float("nan")
ring_rmw = rate("ring (io_uring) read-modify-write")
plain_r, plain_w = rate("plain O_DIRECT read"), rate("plain O_DIRECT write")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"\n{datetime.date.today()}, {platform.node()}: {os.cpu_count()} x {cpu}; disk under {os.path.dirname(work)}: "
      f"plain O_DIRECT {plain_r:.2f} GB/s read, {plain_w:.2f} GB/s write; swap ring (io_uring) read-modify-write "
      f"{ring_rmw:.2f} GB/s. Model: configs/gpt-bench.json, {rows[0]['psi']:,} parameters, bf16, ZeRO 3, 1 rank, "
      f"{steps} steps (median ms/step of steps 2-{steps}).\n")
print("| variant | ms/step | added to the in-memory step | optimizer state in memory | parameters in memory "
      "| swap I/O per step (read + write) | the ring's time for that I/O | added time / the ring's time |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    per_step = r["reads"] + r["writes"]
    added = r["ms"] - rows[0]["ms"]
    ring_ms = per_step / (ring_rmw * 1e9) * 1e3
    # Under 1 MB per step is not swap traffic (a variant without offload writes its logs).
    io = f"{per_step / 1e6:.0f} MB | {ring_ms:.0f} ms | {added / ring_ms:.2f}" if per_step >= 1e6 else "- | - | -"
    print(f"| {r['name']} | {r['ms']:.0f} | {added:+.0f} ms ({r['ms'] / rows[0]['ms']:.2f}x) "
          f"| {r['mem']['optimizer_state'] / 2**20:.1f} MiB | {r['mem']['parameters'] / 2**20:.1f} MiB | {io} |")
same = all(r["losses"] == rows[0]["losses"] for r in rows)
print(f"\nLosses of the four variants {'identical' if same else 'DIFFER'}: {rows[0]['losses']}")
if not same:
    sys.exit("losses differ between variants")
PY
