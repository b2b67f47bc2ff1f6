#!/usr/bin/env bash
# Checkpoint speed (docs/checkpoint.md): save and load throughput of dslaunch-worker's checkpoints
# next to a plain sequential write and read of the same number of bytes on the same disk, and the
# training stall per checkpoint with synchronous and asynchronous saves, and with asynchronous saves
# written from the in-memory snapshot of their step (snapshots every step), all in the same run.
# Prints Markdown for docs/benchmarks.md. Needs root for dropping the page cache before reads.
#
#   scripts/bench-checkpoint.sh [DIR]     (default: a fresh directory under $TMPDIR or /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
[[ -f data/fortunes.train.bin ]] || scripts/prepare-data.sh >/dev/null

work="${1:-$(mktemp -d)}"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import json, os, re, statistics, subprocess, sys, time, datetime, platform
work = sys.argv[1]
root = os.getcwd()
# A GPT of about 101 M parameters: 1.2 GB of fp32 state (master weights and Adam's moments).
config = {
    "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    "zero_optimization": {"stage": 1}, "steps_per_print": 1, "seed": 1,
    "model": {"type": "gpt", "n_layer": 8, "n_head": 16, "n_embd": 1024, "block_size": 64, "vocab_size": 256},
    "data": {"train": os.path.join(root, "data/fortunes.train.bin")},
    "train": {"steps": 12, "eval_interval": 0, "sample_tokens": 0},
}
ranks = 2
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")

def run(name, checkpoint, steps=12):
    c = json.loads(json.dumps(config))
    c["checkpoint"] = checkpoint
    c["train"]["steps"] = steps
    path = os.path.join(work, name + ".json")
    json.dump(c, open(path, "w"))
    p = subprocess.run([os.path.join(root, "build/bin/dslaunch"), "--log_dir", os.path.join(work, "logs"),
                        "--nproc_per_node", str(ranks), path], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{name} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout

line = re.compile(r"step (\d+) \| checkpoint \(([^)]+)\) \S+: ([0-9.]+) MB in ([0-9.]+) s, training stalled ([0-9.]+) s")
def saves(out):
    return [(int(m[1]), float(m[3]), float(m[4]), float(m[5])) for m in line.finditer(out)]

# Synchronous: a save every 3 steps (3, 6, 9, 12); the first is a warm-up. Asynchronous saves get
# 3 steps to finish writing in the background.
sync_dir = os.path.join(work, "sync")
sync_out = run("sync", {"dir": sync_dir, "interval": 3})
sync = saves(sync_out)[1:]
mb = sync[0][1]
sync_seconds = statistics.median(s[2] for s in sync)
# Asynchronous, into another directory.
# Asynchronous: two steps more, so that the saves measured (6, 9, 12) are not the end-of-run save,
# which waits for its write by definition.
async_out = run("async", {"dir": os.path.join(work, "async"), "interval": 3, "async": True}, steps=14)
asyn = [s for s in saves(async_out) if s[0] in (6, 9, 12)]
async_stall = statistics.median(s[3] for s in asyn)
async_seconds = statistics.median(s[2] for s in asyn)
# Asynchronous from the in-memory snapshot of the step: snapshots every step (each a copy of the
# state slice, on the training thread, its time in the step records' snapshot_ms), and the saves
# write the snapshot of their step, pinned, without another copy.
logs = os.path.join(work, "logs")
before = set(os.listdir(logs))
snap_out = run("snapshot", {"dir": os.path.join(work, "snapshot"), "interval": 3, "async": True,
                            "snapshot_interval": 1}, steps=14)
snap = [s for s in saves(snap_out) if s[0] in (6, 9, 12)]
assert all(m[2] == "async, from the in-memory snapshot" for m in line.finditer(snap_out) if int(m[1]) in (6, 9, 12)), snap_out
snap_stall = statistics.median(s[3] for s in snap)
snap_seconds = statistics.median(s[2] for s in snap)
(job,) = set(os.listdir(logs)) - before
records = [json.loads(l) for l in open(os.path.join(logs, job, "metrics.jsonl")) if l.startswith("{")]
snapshot_ms = statistics.median(r["snapshot_ms"] for r in records if r.get("event") == "step" and "snapshot_ms" in r)
# Load: a finished run resumed (it loads and stops), page cache dropped first.
load_times = []
for _ in range(3):
    drop_caches()
    out = run("load", {"dir": sync_dir, "load": "auto"}, steps=12)
    m = re.search(r"resumed from \S+ at step \d+ \(.*; ([0-9.]+) MB in ([0-9.]+) s\)", out)
    load_times.append(float(m[2]))
load_seconds = statistics.median(load_times)

# The same bytes written and read sequentially on the same disk, one file per rank at once (as the
# ranks write their shards): written from a buffer holding all of them (random bytes: dd from
# /dev/zero would flatter a thin-provisioned VM disk) in 8 MiB writes, then fsynced; read back by
# dd, cold.
per_rank = int(mb * 1e6 / ranks)
# Each writer fills a buffer of all its bytes first (as a rank holds its state), then, timed, writes
# it in 8 MiB slices and fsyncs; it reports its time on stdout.
writer = """
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
block = os.urandom(8 << 20)
buf = bytearray(block * (n // len(block) + 1))[:n]
view = memoryview(buf)
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
t0 = time.perf_counter()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
at = 0
while at < n:
    at += os.write(fd, view[at:at + (8 << 20)])
os.fsync(fd)
os.close(fd)
sys.stdout.write(f"{time.perf_counter() - t0}\\n")
"""
def plain_write_once():
    procs = [subprocess.Popen([sys.executable, "-c", writer, f"{work}/plain{r}", str(per_rank)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for r in range(ranks)]
    for p in procs: assert p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs: p.stdin.write("go\n"); p.stdin.flush()
    for p in procs: p.wait()
    return time.perf_counter() - t0
def dd_read():
    drop_caches()
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["dd", f"if={work}/plain{r}", "of=/dev/null", "bs=8M", "status=none"]) for r in range(ranks)]
    for p in procs: p.wait()
    return time.perf_counter() - t0
plain_bytes = ranks * per_rank
write_times = [plain_write_once() for _ in range(3)]
read_times = [dd_read() for _ in range(3)]
plain_write = plain_bytes / statistics.median(write_times) / 1e9
plain_read = plain_bytes / statistics.median(read_times) / 1e9
save_gbs = mb / 1e3 / sync_seconds
load_gbs = mb / 1e3 / load_seconds

cpu = "?"
for l in open("/proc/cpuinfo"):
    if l.startswith("model name"):
        cpu = l.split(":", 1)[1].strip(); break
fsys = subprocess.run(["df", "-T", work], capture_output=True, text=True).stdout.splitlines()[-1].split()[1]
print(f"Machine: {os.cpu_count()} vCPU {cpu}; {platform.system()} {platform.release()}; {fsys} at {work}. "
      f"Date: {datetime.date.today()}. Model: GPT 8 x 1024 (101 M parameters), AdamW, ZeRO 1, {ranks} ranks: "
      f"{mb:.0f} MB per checkpoint ({ranks} shards). Medians of 3.\n")
print("| operation | seconds | GB/s | vs plain dd |")
print("|---|---|---|---|")
print(f"| checkpoint save (sync: shards + fsync + meta.json + latest) | {sync_seconds:.2f} | {save_gbs:.2f} | {save_gbs / plain_write:.0%} of write |")
print(f"| plain sequential write, same bytes from memory, {ranks} files at once, 8 MiB writes + fsync | {statistics.median(write_times):.2f} | {plain_write:.2f} | |")
print(f"| checkpoint load (cold cache: CRC check + reads + restore) | {load_seconds:.2f} | {load_gbs:.2f} | {load_gbs / plain_read:.0%} of read |")
print(f"| plain sequential read, same bytes, cold cache | {statistics.median(read_times):.2f} | {plain_read:.2f} | |")
print()
print("| save mode | training stalled per checkpoint (s) | save completes after (s) | stall / sync save |")
print("|---|---|---|---|")
print(f"| sync | {sync_seconds:.3f} | {sync_seconds:.2f} | 100% |")
print(f"| async | {async_stall:.3f} | {async_seconds:.2f} | {async_stall / sync_seconds:.1%} |")
print(f"| async, from the in-memory snapshot of the step | {snap_stall:.3f} | {snap_seconds:.2f} | {snap_stall / sync_seconds:.1%} |")
print()
print(f"With snapshots every step, each step also pays for its snapshot: {snapshot_ms / 1e3:.3f} s (median snapshot_ms).")
PY
