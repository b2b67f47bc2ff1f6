#!/usr/bin/env bash
# Activation checkpointing (docs/engine.md, "Recomputation"): step time and activation memory of
# the bundled gpt with and without recomputing its blocks, side by side in one run. Prints a
# Markdown table for docs/benchmarks.md.
#
#   scripts/bench-recompute.sh [config] [steps] [repeats]   (defaults configs/gpt-bench.json, 6, 2)
#
# Two measurements, each variant in a process of its own (a process's peak RSS never falls):
#  - the model alone (build/bin/dslaunch-recompute-bench): forward + backward of one micro-batch
#    of the config's shape, fp32, no engine; the model's own accounting of its activation bytes
#    (checked there against the formula), ms of the fastest of 3 micro-steps, peak RSS; the
#    two variants' gradients
#    must hash to the same bits;
#  - the whole training run, `dslaunch --nproc_per_node 1` on the config with and without an
#    "activation_checkpointing" block: the fastest step's ms from metrics.jsonl (the first step
#    is warm-up and not counted), the worker's peak RSS (the largest descendant's ru_maxrss), and every step's
#    loss, which must be the same.
# One thread per process (OMP/OPENBLAS_NUM_THREADS=1). Every timing runs `repeats` times and the
# best counts: on a shared VM other tenants only ever slow a run down. The load average before
# and after is printed with the table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
[[ -f data/fortunes.train.bin ]] || scripts/prepare-data.sh >/dev/null

config="${1:-configs/gpt-bench.json}"
steps="${2:-6}"
repeats="${3:-2}"
build_dir="${DSLAUNCH_BUILD_DIR:-build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$config" "$steps" "$repeats" "$build_dir" "$work" <<'PY'
import datetime, json, os, platform, subprocess, sys
config_path, steps, repeats, build_dir, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    os.path.abspath(sys.argv[4]), sys.argv[5]
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
load_before = os.getloadavg()

base = json.load(open(config_path))
cfg_dir = os.path.dirname(os.path.abspath(config_path))
for k in ("train", "val"):
    if k in base.get("data", {}):
        base["data"][k] = os.path.normpath(os.path.join(cfg_dir, base["data"][k]))
model = base["model"]
layers, micro = model["n_layer"], base["train_micro_batch_size_per_gpu"]

def run(cmd):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout

# Runs cmd in a fresh Python whose only child is cmd: its RUSAGE_CHILDREN ru_maxrss (kB) is the
# peak RSS of the largest process of cmd's tree that was waited for (the worker, under the agent).
PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(r.returncode)")

variants = [0, layers]
model_runs = {k: [] for k in variants}
for _ in range(repeats):
    for k in variants:  # interleaved, so a burst of load hits both
        out = run([os.path.join(build_dir, "bin/dslaunch-recompute-bench"), "--n_layer", str(layers),
                   "--n_head", str(model["n_head"]), "--n_embd", str(model["n_embd"]),
                   "--block_size", str(model["block_size"]), "--micro", str(micro), "--recompute", str(k),
                   "--steps", "3"])
        model_runs[k].append(json.loads(out))
hashes = {r["gradient_fnv1a"] for runs in model_runs.values() for r in runs}
if len(hashes) != 1:
    sys.exit(f"the variants' gradients differ: {model_runs}")

train_runs = {k: [] for k in variants}
for i in range(repeats):
    for k in variants:
        c = json.loads(json.dumps(base))
        c["train"] = {"steps": steps, "eval_interval": 0, "eval_steps": 1, "sample_tokens": 0}
        c["steps_per_print"] = 1
        if k:
            c["activation_checkpointing"] = {}
        path = os.path.join(work, f"k{k}-{i}.json")
        json.dump(c, open(path, "w"))
        job = f"recompute-k{k}-{i}"
        out = run([sys.executable, "-c", PEAK, os.path.join(build_dir, "bin/dslaunch"), "--log_dir", work,
                   "--job_id", job, "--nproc_per_node", "1", path])
        peak = int(out.strip().splitlines()[-1])
        records = [json.loads(l) for l in open(os.path.join(work, job, "metrics.jsonl"))]
        step_records = [r for r in records if r["event"] == "step"]
        ms = min(r["ms_per_step"] for r in step_records[1:])
        train_runs[k].append({"ms": ms, "peak": peak, "losses": [repr(r["loss"]) for r in step_records]})
losses = {tuple(r["losses"]) for runs in train_runs.values() for r in runs}
if len(losses) != 1:
    sys.exit(f"the variants' losses differ: {losses}")

cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
load_after = os.getloadavg()
mib = lambda b: f"{b / 2**20:.1f}"
print(f"Machine: {os.cpu_count()} vCPU {cpu}; {platform.system()} {platform.release()}. "
      f"Date: {datetime.date.today()}. Load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after. "
      f"Model: {config_path} (n_layer {layers}, n_embd {model['n_embd']}, n_head {model['n_head']}, "
      f"block_size {model['block_size']}), micro-batch {micro}, fp32, 1 rank, 1 thread; best of {repeats}.\n")
print("| blocks recomputed | activations, model's accounting (MiB) | model alone: ms per forward + backward | "
      "model alone: peak RSS (MiB) | training: ms/step | training: worker peak RSS (MiB) |")
print("|---|---|---|---|---|---|")
for k in variants:
    m, t = model_runs[k], train_runs[k]
    print(f"| {k} of {layers} | {mib(m[0]['activation_bytes'])} | {min(r['ms_per_step'] for r in m):.0f} | "
          f"{mib(max(r['peak_rss_bytes'] for r in m))} | {min(r['ms'] for r in t):.0f} | "
          f"{mib(max(r['peak'] for r in t))} |")
a0, a1 = model_runs[0][0]["activation_bytes"], model_runs[layers][0]["activation_bytes"]
print(f"\nActivations saved: {mib(a0 - a1)} MiB ({100 * (1 - a1 / a0):.0f}%). Gradients (model alone) bitwise "
      f"equal across variants (FNV-1a {hashes.pop()}); training losses of all {steps} steps equal.")
PY
