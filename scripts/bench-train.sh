#!/usr/bin/env bash
# Training speed: tokens/s and model-FLOPs utilisation (MFU) of `dslaunch-worker train` for
# configs/gpt-bench.json and configs/gpt-demo.json on 1 and 2 local ranks, one thread per rank,
# against this machine's single-thread sgemm FLOP/s measured in the same run
# (build/bin/dslaunch-gemm-bench, on the GPT step's shapes, the best of OpenBLAS's own kernels and
# the core types the CPU supports). Prints a Markdown table for
# docs/benchmarks.md.
#
#   scripts/bench-train.sh [steps] [repeats]   (defaults 30 and 2; the first print interval is warm-up)
#
# Every measurement (the sgemm rate, each config x ranks) runs `repeats` times and the best counts:
# on a shared VM other tenants only ever slow a run down. The load average before and after is
# printed with the table.
# Each run uses a temporary copy of the config with `train.steps` set, one validation batch at
# the end and no sample, so that only training steps are timed. MFU = tokens/s x FLOPs per token
# / (ranks x the best one-core sgemm FLOP/s of the run, alone or beside the other core), FLOPs per
# token as the worker's start line states it (docs/model.md).
#
# Then gpt-bench on 2 ranks with zero_optimization.overlap_comm off and on, and gpt-demo on 2 ranks
# with in-memory snapshots every step and none (checkpoint.snapshot_interval 1 and 0), alternating.
#
# Then the yardstick: gpt-bench on 2 ranks against the same model in PyTorch with
# DistributedDataParallel over gloo (benchmarks/torch/gpt_ddp.py; Debian's python3-torch), the
# same batch, AdamW and OpenBLAS kernels (the runtime's choice, given to PyTorch as
# OPENBLAS_CORETYPE), both launched by dslaunch, the two alternating `repeats` times; the best of
# each counts and the ratio is printed; then the same on 1 rank, where no collective and no wait for
# the other rank enters the step. Every sgemm call of those runs is timed
# (build/lib/libdslaunch-blas-time.so through LD_PRELOAD), which splits each program's step into
# the products and the rest, and bounds the ratio any work outside the products could reach.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null
scripts/prepare-data.sh >/dev/null

steps="${1:-30}"
repeats="${2:-2}"
build_dir="${DSLAUNCH_BUILD_DIR:-build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$steps" "$repeats" "$build_dir" "$work" <<'PY'
import json, os, re, subprocess, sys, time
steps, repeats, build_dir, work = int(sys.argv[1]), int(sys.argv[2]), os.path.abspath(sys.argv[3]), sys.argv[4]
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

def run(cmd, run_env=None):
    p = subprocess.run(cmd, env=run_env or env, capture_output=True, text=True, cwd=work)
    if p.returncode != 0:
        sys.exit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout

def sgemm_gflops(out):
    m = re.search(r"sgemm GFLOP/s \(model mix\): ([0-9.]+)", out)
    if not m:
        sys.exit("dslaunch-gemm-bench printed no 'sgemm GFLOP/s (model mix)' line:\n" + out)
    return float(m.group(1))

gemm = [os.path.join(build_dir, "bin", "dslaunch-gemm-bench"), "--seconds", "1"]
load_before = open("/proc/loadavg").read().split()[0]
# The best sgemm this machine has: OpenBLAS's own kernels and each core type the CPU supports (the
# runtime picks among the same: docs/engine.md, "Matrix kernels").
flags = open("/proc/cpuinfo").read()
have = lambda f: re.search(r"\b" + f + r"\b", flags) is not None
cores = [None]
if all(have(f) for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")): cores.append("SkylakeX")
if have("avx2") and have("fma"): cores.append("Haswell")
def gemm_env(core):
    return dict(env, OPENBLAS_CORETYPE=core) if core else env
def run_gemm(core):
    p = subprocess.run(gemm, env=gemm_env(core), capture_output=True, text=True, check=True)
    return p.stdout
gemm_out, best_core = max(((run_gemm(c), c) for c in cores for _ in range(repeats)), key=lambda r: sgemm_gflops(r[0]))
sgemm = sgemm_gflops(gemm_out) * 1e9
# The same on both cores at once (two processes): what each core gives when both are busy.
def both_cores():
    procs = [subprocess.Popen(gemm, env=gemm_env(best_core), stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return [sgemm_gflops(p.communicate()[0]) for p in procs]
sgemm_both = max((both_cores() for _ in range(repeats)), key=sum)
# MFU is against the best rate one core gave in this run, alone or beside the other: on a shared
# VM the load moves between the measurements, and the best is the machine's own.
sgemm = max(sgemm, max(sgemm_both) * 1e9)

torch_script = os.path.abspath("benchmarks/torch/gpt_ddp.py")
# Times every sgemm call of a run through LD_PRELOAD (benchmarks/blas_time.cc).
blas_time_library = os.path.join(build_dir, "lib", "libdslaunch-blas-time.so")
# Debian's python3-torch is for /usr/bin/python3, which a pyenv or venv python3 may hide.
def find_torch_python():
    for py in ("python3", "/usr/bin/python3"):
        if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    sys.exit("no python3 imports torch: install python3-torch (scripts/setup.sh --bench)")
torch_python = find_torch_python()

def measure(config_path, ranks, torch=False, zero=None, checkpoint=None, blas_time=None):
    with open(config_path) as f:
        config = json.load(f)
    if zero:
        config.setdefault("zero_optimization", {}).update(zero)
    if checkpoint:
        config.setdefault("checkpoint", {}).update(checkpoint)
    base = os.path.dirname(os.path.abspath(config_path))
    config["data"] = {k: os.path.normpath(os.path.join(base, v)) for k, v in config["data"].items()}
    train = config.setdefault("train", {})
    train.update({"steps": steps, "eval_interval": 0, "eval_steps": 1, "sample_tokens": 0})
    tmp = os.path.join(work, os.path.basename(config_path))
    with open(tmp, "w") as f:
        json.dump(config, f)
    launcher = [os.path.join(build_dir, "bin", "dslaunch"), "--log_dir", os.path.join(work, "logs"),
                "--nproc_per_node", str(ranks)]
    run_env = dict(env)
    if blas_time:
        run_env.update(LD_PRELOAD=blas_time_library, DSLAUNCH_BLAS_TIME_FILE=blas_time)
    if torch:
        out = run(launcher + [torch_script, tmp], dict(run_env, PYTHON_EXEC=torch_python,
                                                       OPENBLAS_CORETYPE=best_core or ""))
        lines = re.findall(r"\[rank 0\] step (\d+) \| .*\| ([0-9.]+) tokens/s \| ([0-9.]+) ms/step", out)
        if len(lines) < 2:
            sys.exit(f"unexpected PyTorch output for {config_path} x {ranks}:\n{out}")
        return (*weighted(lines), None)
    out = run(launcher + [tmp], run_env)
    kernels.add(re.search(r"\[rank 0\] sgemm: OpenBLAS (\S+) kernels", out).group(1))
    flops = re.search(r"\[rank 0\] model gpt: .*?([0-9.e+]+) FLOPs per token", out)
    lines = re.findall(r"\[rank 0\] step (\d+) \| .*\| ([0-9.]+) tokens/s \| ([0-9.]+) ms/step", out)
    if not flops or len(lines) < 2:
        sys.exit(f"unexpected worker output for {config_path} x {ranks}:\n{out}")
    tps, ms = weighted(lines)
    return tps, ms, float(flops.group(1))

def weighted(lines):
    # Skip the first print interval (start-up, page faults); weight the rest by their time.
    tokens = seconds = 0.0
    prev = int(lines[0][0])
    for step, tps, ms in lines[1:]:
        n = int(step) - prev
        prev = int(step)
        dt = n * float(ms) / 1e3
        tokens += float(tps) * dt
        seconds += dt
    return tokens / seconds, seconds * 1e3 / (prev - int(lines[0][0]))

def torch_version():
    return subprocess.run([torch_python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True, check=True).stdout.strip()

rows = []
kernels = set()
for config in ("configs/gpt-bench.json", "configs/gpt-demo.json"):
    for ranks in (1, 2):
        tps, ms, fpt = max((measure(config, ranks) for _ in range(repeats)), key=lambda r: r[0])
        per_rank = tps * fpt / ranks
        rows.append((config, ranks, tps, ms, fpt, per_rank, per_rank / sgemm))

cpu = "?"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
print(f"machine: {os.cpu_count()} cores, {cpu}; date: {time.strftime('%Y-%m-%d')}; "
      f"load average (1 min) before: {load_before}, after: {open('/proc/loadavg').read().split()[0]}")
print(gemm_out.rstrip())
print(f"the workers ran OpenBLAS's {', '.join(sorted(kernels))} kernels")
print(f"sgemm on both cores at once (two processes): {sgemm_both[0]:.1f} + {sgemm_both[1]:.1f} GFLOP/s\n")
print(f"{steps} steps per run, best of {repeats}, the first print interval skipped; OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1; "
      f"MFU against {sgemm / 1e9:.1f} GFLOP/s per rank (the best single-thread sgemm rate above, model mix)\n")
print("| config | ranks | tokens/s | ms/step | FLOPs/token | model GFLOP/s per rank | MFU |")
print("|---|---|---|---|---|---|---|")
for config, ranks, tps, ms, fpt, per_rank, mfu in rows:
    print(f"| {config} | {ranks} | {tps:.0f} | {ms:.0f} | {fpt:.4g} | {per_rank / 1e9:.1f} | {100 * mfu:.1f}% |")

# The gradient reduction overlapped with the backward (zero_optimization.overlap_comm) against
# not, gpt-bench on 2 ranks, alternating.
overlap = {False: [], True: []}
for _ in range(repeats):
    for on in (False, True):
        overlap[on].append(measure("configs/gpt-bench.json", 2, zero={"overlap_comm": on})[0])
print("\nconfigs/gpt-bench.json on 2 ranks with zero_optimization.overlap_comm off and on, alternating:\n")
print("| overlap_comm | tokens/s per run | best |")
print("|---|---|---|")
for on in (False, True):
    print(f"| {str(on).lower()} | {', '.join(f'{t:.0f}' for t in overlap[on])} | {max(overlap[on]):.0f} |")
print(f"\non / off: {max(overlap[True]) / max(overlap[False]):.2f}x tokens/s (best against best)")

# In-memory snapshots every step (checkpoint.snapshot_interval 1) against none, gpt-demo on 2 ranks
# (the model of scripts/bench-elastic.sh), alternating.
snap = {0: [], 1: []}
for _ in range(repeats):
    for interval in (0, 1):
        snap[interval].append(measure("configs/gpt-demo.json", 2, checkpoint={"snapshot_interval": interval})[0])
print("\nconfigs/gpt-demo.json on 2 ranks with checkpoint.snapshot_interval 0 and 1, alternating:\n")
print("| snapshot_interval | tokens/s per run | best |")
print("|---|---|---|")
for interval in (0, 1):
    print(f"| {interval} | {', '.join(f'{t:.0f}' for t in snap[interval])} | {max(snap[interval]):.0f} |")
print(f"\nevery step / none: {max(snap[1]) / max(snap[0]):.3f}x tokens/s (best against best)")

# The yardstick, alternating so that both see the same machine load. Every run's sgemm calls are
# timed (benchmarks/blas_time.cc: two clock reads per call, a few thousand calls per step).
def blas_totals(path):
    # Rank 0's line; the worker's kernel probes (sgemm-probe) write their own lines.
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields[1] == "0" and "sgemm-probe" not in line:
                values = dict(zip(fields[0::2], fields[1::2]))
                return float(values["flops"]), float(values["sgemm_s"]), float(values["span_s"])
    sys.exit(f"no rank 0 line in {path}")

def yardstick(ranks):
    ours, theirs = [], []
    for i in range(repeats):
        for program, results, torch in (("ours", ours, False), ("theirs", theirs, True)):
            path = os.path.join(work, f"blas-time-{program}-{ranks}-{i}")
            tps, ms, _ = measure("configs/gpt-bench.json", ranks, torch=torch, blas_time=path)
            results.append((tps, ms, *blas_totals(path)))
    best_ours = max(ours, key=lambda r: r[0])
    best_theirs = max(theirs, key=lambda r: r[0])
    print(f"\nconfigs/gpt-bench.json on {ranks} rank{'s' if ranks > 1 else ''} against PyTorch {torch_version()} DDP "
          f"(gloo, the same model, batch, AdamW and OpenBLAS {best_core or 'default'} kernels), {repeats} alternating "
          f"runs each, best counts:\n")
    print("| program | tokens/s per run | best | ms/step |")
    print("|---|---|---|---|")
    print(f"| dslaunch-worker | {', '.join(f'{r[0]:.0f}' for r in ours)} | {best_ours[0]:.0f} | {best_ours[1]:.0f} |")
    print(f"| PyTorch DDP | {', '.join(f'{r[0]:.0f}' for r in theirs)} | {best_theirs[0]:.0f} | {best_theirs[1]:.0f} |")
    print(f"\ndslaunch-worker / PyTorch DDP on {ranks} rank{'s' if ranks > 1 else ''}: "
          f"{best_ours[0] / best_theirs[0]:.2f}x tokens/s")

    # Where each best run's time went: sgemm against the rest, over rank 0's training span (its
    # first sgemm call to its last). The ceiling: dslaunch-worker with no time at all outside sgemm
    # and PyTorch's sgemm rate, against PyTorch as it ran. Our FLOPs per step include the one
    # validation batch, which lowers the ceiling by about 1/(3 x steps), never raises it.
    print("\nWhere rank 0's time went in the best runs (sgemm timed per call; the span is the first call's start to "
          "the last call's end):\n")
    print("| program | GFLOP per step in sgemm | sgemm GFLOP/s | share of the span in sgemm | ms per step outside sgemm |")
    print("|---|---|---|---|---|")
    for name, (tps, ms, flops, sgemm_s, span_s) in (("dslaunch-worker", best_ours), ("PyTorch DDP", best_theirs)):
        outside_ms = (span_s - sgemm_s) / steps * 1e3
        print(f"| {name} | {flops / steps / 1e9:.1f} | {flops / sgemm_s / 1e9:.1f} | {100 * sgemm_s / span_s:.1f}% | "
              f"{outside_ms:.0f} |")
    flops_theirs, sgemm_theirs, span_theirs = best_theirs[2:]
    ceiling = span_theirs / sgemm_theirs * flops_theirs / best_ours[2]
    print(f"\nceiling: with nothing outside sgemm and PyTorch's sgemm rate, dslaunch-worker would reach {ceiling:.2f}x "
          f"PyTorch's tokens/s")

# On 2 ranks (the headline comparison), then on 1: no collectives and no waiting for the other rank,
# so what is left of the ratio is the step's own compute.
for ranks in (2, 1):
    yardstick(ranks)
PY
