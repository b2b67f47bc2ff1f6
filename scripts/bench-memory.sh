#!/usr/bin/env bash
# Per-rank memory of the training engine against the ZeRO paper's formulas: the bytes of
# parameters, gradients and optimizer state that rank 0's engine holds (its own allocations, from
# metrics.jsonl), for ZeRO stages 0-3 at 1, 2 and 4 ranks, with fp16 storage and Adam:
#   stage 0: 16 Psi   stage 1: 4 Psi + 12 Psi/N   stage 2: 2 Psi + 14 Psi/N   stage 3: 16 Psi/N
# plus the transient fp32 buffers (high-water mark) that the formulas leave out. Prints a Markdown
# table for docs/benchmarks.md.
#
#   scripts/bench-memory.sh [config]     (default configs/gpt-bench.json)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
[[ -f data/fortunes.train.bin ]] || scripts/prepare-data.sh >/dev/null

config="${1:-configs/gpt-bench.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$config" "$work" <<'PY'
import json, os, platform, subprocess, sys, datetime
config_path, work = sys.argv[1], sys.argv[2]
base = json.load(open(config_path))
# Paths in the config are relative to its directory; the copies live elsewhere.
cfg_dir = os.path.dirname(os.path.abspath(config_path))
for k in ("train", "val"):
    if k in base.get("data", {}):
        base["data"][k] = os.path.normpath(os.path.join(cfg_dir, base["data"][k]))
base["fp16"] = {"enabled": True}
base["bf16"] = {"enabled": False}
base["train_micro_batch_size_per_gpu"] = 1
base.pop("train_batch_size", None)
base["gradient_accumulation_steps"] = 1
base["train"] = {"steps": 2, "eval_interval": 0, "eval_steps": 1, "sample_tokens": 0}
buckets = 500000
rows = []
for stage in (0, 1, 2, 3):
    for n in (1, 2, 4):
        c = json.loads(json.dumps(base))
        c["zero_optimization"] = {"stage": stage, "reduce_bucket_size": buckets, "allgather_bucket_size": buckets,
                                  "stage3_prefetch_bucket_size": buckets,
                                  "stage3_param_persistence_threshold": 10000}
        path = os.path.join(work, f"s{stage}n{n}.json")
        json.dump(c, open(path, "w"))
        job = f"mem-s{stage}-n{n}"
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        p = subprocess.run([os.path.abspath("build/bin/dslaunch"), "--log_dir", work, "--job_id", job,
                            "--nproc_per_node", str(n), path], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            sys.exit(f"run failed (stage {stage}, {n} ranks):\n{p.stdout}\n{p.stderr}")
        records = [json.loads(l) for l in open(os.path.join(work, job, "metrics.jsonl"))]
        start = next(r for r in records if r["event"] == "start")
        end = next(r for r in records if r["event"] == "end")
        psi = start["parameters"]
        m = end["bytes_per_rank"]
        total = m["parameters"] + m["gradients"] + m["optimizer_state"]
        formula = {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n, 3: 16 * psi / n}[stage]
        rows.append((stage, n, psi, m, total, formula))
cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
print(f"Machine: {os.cpu_count()} vCPU {cpu}; {platform.system()} {platform.release()}. "
      f"Date: {datetime.date.today()}. Model: {config_path} (Psi = {rows[0][2]:,} parameters), fp16, Adam; "
      f"reduce/all-gather/prefetch buckets {buckets:,} elements, persistence threshold 10,000.\n")
print("| stage | N | parameters (MB) | gradients (MB) | optimizer state (MB) | total (MB) | ZeRO formula (MB) | total / formula | working high-water (MB) |")
print("|---|---|---|---|---|---|---|---|---|")
mb = lambda b: f"{b / 1e6:.2f}"
for stage, n, psi, m, total, formula in rows:
    print(f"| {stage} | {n} | {mb(m['parameters'])} | {mb(m['gradients'])} | {mb(m['optimizer_state'])} | {mb(total)} | "
          f"{mb(formula)} | {total / formula:.4f} | {mb(m['working'])} |")
PY
