#!/usr/bin/env bash
# The sgemm libraries and kernels this machine can run, on the GPT step's products: the table of
# docs/engine.md ("Matrix kernels"). Times build/bin/dslaunch-gemm-bench (benchmarks/gemm_bench.cc)
# with OpenBLAS's own kernels and each OPENBLAS_CORETYPE the CPU supports, and the same benchmark
# source built against Debian's BLIS 0.9 and oneDNN 2.6 (benchmarks/other_blas/: the few calls
# the benchmark makes, answered by them), on 1 and 2 threads, interleaved, `repeats` rounds, the
# best of each (other tenants only slow a run down). Prints the CPU and a Markdown table.
#
#   scripts/bench-blas.sh [seconds per shape] [repeats]   (defaults 0.3 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench >/dev/null
scripts/build.sh >/dev/null

seconds="${1:-0.3}"
repeats="${2:-2}"
build_dir="${DSLAUNCH_BUILD_DIR:-build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The benchmark and the runtime's product code, compiled against each other library.
sources=(benchmarks/gemm_bench.cc runtime/ops/cpu/sgemm_probe.cc runtime/ops/cpu/sgemm_choice.cc common/text.cc
  common/status.cc)
flags=(-std=c++20 -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread)
g++ "${flags[@]}" -o "$work/gemm-blis" "${sources[@]}" benchmarks/other_blas/blis_names.cc \
  /usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4 -fopenmp
g++ "${flags[@]}" -o "$work/gemm-dnnl" "${sources[@]}" benchmarks/other_blas/dnnl_cblas.cc -ldnnl

python3 - "$seconds" "$repeats" "$build_dir" "$work" <<'PY'
import os, re, subprocess, sys
seconds, repeats, build_dir, work = sys.argv[1], int(sys.argv[2]), os.path.abspath(sys.argv[3]), sys.argv[4]
bench = os.path.join(build_dir, "bin", "dslaunch-gemm-bench")
flags = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*:\s*(.*)", flags).group(1)
have = lambda f: re.search(r"\b" + f + r"\b", flags) is not None
cores = []
if all(have(f) for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")): cores.append("SkylakeX")
if have("avx2") and have("fma"): cores.append("Haswell")
if have("avx"): cores.append("Sandybridge")
variants = [("OpenBLAS 0.3.21, its own choice", bench, {})]
variants += [(f"OpenBLAS 0.3.21, OPENBLAS_CORETYPE={c}", bench, {"OPENBLAS_CORETYPE": c}) for c in cores]
variants += [("BLIS 0.9 (libblis4-openmp)", os.path.join(work, "gemm-blis"), {}),
             ("oneDNN 2.6 (dnnl_sgemm)", os.path.join(work, "gemm-dnnl"), {})]
best = {}
names = {}
for _ in range(repeats):
    for threads in (1, 2):
        for label, prog, extra in variants:
            env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                       BLIS_NUM_THREADS=str(threads), **extra)
            out = subprocess.run([prog, "--seconds", seconds], env=env, capture_output=True, text=True, check=True).stdout
            rate = float(re.search(r"model mix\): ([0-9.]+)", out).group(1))
            square = float(re.search(r"square \(reference\)\s+\S+\s+\S+\s+\S+\s+\S+\s+([0-9.]+)", out).group(1))
            names[label] = re.search(r"sgemm on (.*?);", out).group(1)
            key = (label, threads)
            best[key] = max(best.get(key, (0, 0)), (rate, square))
print(f"CPU: {model}; {os.cpu_count()} CPUs; {repeats} rounds, best of each; GFLOP/s on the GPT step's products "
      "(rows 2048, n_embd 512; model mix) and on a 2048^3 product")
print()
print("| library and kernels | reports itself as | 1 thread: model mix | 1 thread: square | 2 threads: model mix | 2 threads: square |")
print("|---|---|---|---|---|---|")
for label, _, _ in variants:
    r1, r2 = best[(label, 1)], best[(label, 2)]
    print(f"| {label} | {names[label]} | {r1[0]:.1f} | {r1[1]:.1f} | {r2[0]:.1f} | {r2[1]:.1f} |")
PY
