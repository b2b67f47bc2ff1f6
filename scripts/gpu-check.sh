#!/usr/bin/env bash
# The gpu tier and the GPU benchmarks (docs/gpu.md, "Checking on a GPU"). Three ways to call it:
#
#   scripts/gpu-check.sh                 on a GPU machine with this project's build dependencies:
#                                        builds build-gpu/ with CUDA and NCCL, runs `ctest -L gpu`
#                                        with the gpu requirement mandatory (a skip is a failure),
#                                        then the two benchmarks and the demo on the device
#   scripts/gpu-check.sh --bundle DIR    on a build machine without a GPU: builds the same programs
#                                        and copies them, with the shared libraries they need that
#                                        a CUDA image lacks (OpenBLAS, Fortran runtime, ...), the
#                                        demo's config and data, into DIR beside a copy of this
#                                        script, and packs DIR into DIR.tar.gz
#   bash DIR/gpu-check.sh --run DIR      on a GPU machine with only the CUDA toolkit and NCCL (no
#                                        Boost, Gloo or OpenBLAS): runs the bundled programs, writing
#                                        each one's output under $OUT (or DIR/results) when set
#
# Each test program runs with DSLAUNCH_REQUIRE=gpu (and DSLAUNCH_ALLOW_SKIP unset), so a machine
# whose GPU is not usable fails instead of reporting skips, and for at most
# DSLAUNCH_GPU_PROGRAM_TIMEOUT seconds (300). Then the demo (configs/gpt-demo.json) trains with
# "device": "cuda" through dslaunch and dslaunch-worker-cuda, on one GPU and on every GPU the
# machine has. The last lines are a table of what ran, to paste into docs/benchmarks.md. Exit
# status: 0 when every test passed, both benchmarks passed their checks and every demo run ended.
set -euo pipefail
unset DSLAUNCH_ALLOW_SKIP

gpu_programs() {  # the gpu tier's test programs and the two GPU benchmarks, relative to a build dir
  echo tests/runtime_ops_cuda_gpu_test tests/runtime_nccl_comm_gpu_test tests/runtime_models_cuda_gpu_test \
    tests/runtime_engine_cuda_gpu_test bin/cuda_ops_bench bin/gpt_cuda_bench
}

worker_programs() {  # what `dslaunch` with "device": "cuda" runs, relative to a build dir
  echo bin/dslaunch bin/dslaunch-agent bin/dslaunch-worker bin/dslaunch-worker-cuda
}

build() {  # build BUILD_DIR: configures with CUDA and NCCL on and builds the gpu programs
  local dir="$1"
  cmake -S . -B "$dir" -G Ninja -DDSLAUNCH_WITH_CUDA=ON -DDSLAUNCH_WITH_NCCL=ON >/dev/null
  local targets=()
  for p in $(gpu_programs) $(worker_programs); do targets+=("$(basename "$p")"); done
  ninja -C "$dir" "${targets[@]}"
}

# The directories where a CUDA image keeps cuBLASLt, the CUDA runtime and NCCL: the toolkit's, and
# the NVIDIA wheels of its Python (nvidia-nccl-cu13 and friends).
cuda_library_path() {
  local dirs=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64)
  local py
  for py in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$py" >/dev/null 2>&1; then
      while IFS= read -r d; do dirs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null || true
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for lib in glob.glob(os.path.join(root, "nvidia", "*", "lib")):
        print(lib)
PY
)
    fi
  done
  local IFS=:
  echo "${dirs[*]}"
}

run_programs() {  # run_programs DIR_WITH_PROGRAMS RESULTS_DIR [bench-only]
  local dir="$1" results="$2" only="${3:-}" status=0
  mkdir -p "$results"
  nvidia-smi -L || { echo "gpu-check: nvidia-smi finds no GPU" >&2; return 2; }
  export DSLAUNCH_REQUIRE=gpu
  for p in $(gpu_programs); do
    local exe="$dir/$(basename "$p")"
    [[ -x "$exe" ]] || exe="$dir/$p"
    local name; name="$(basename "$p")"
    [[ -n "$only" && "$name" != *_bench ]] && continue
    echo "== $name"
    # A hung program must not eat a lent machine's minutes: each is bounded.
    local limit="${DSLAUNCH_GPU_PROGRAM_TIMEOUT:-300}"
    if [[ "$name" == *_bench ]]; then
      timeout "$limit" "$exe" 2>&1 | tee "$results/$name.txt" || status=1
    else
      timeout "$limit" "$exe" --duration=true 2>&1 | tee "$results/$name.txt" || status=1
    fi
  done
  return "$status"
}

# The demo on the device: configs/gpt-demo.json with "device": "cuda" and its data from DATA_DIR,
# through dslaunch, on one GPU and then on every GPU (the batch grown where 4 micro-batches do not
# split over them).
run_demo() {  # run_demo BIN_DIR DATA_DIR CONFIG RESULTS_DIR
  local bin="$1" data="$2" config="$3" results="$4" status=0
  local gpus; gpus="$(nvidia-smi -L | wc -l)"
  local worlds=(1); [[ "$gpus" -gt 1 ]] && worlds+=("$gpus")
  for n in "${worlds[@]}"; do
    local batch=32; (( 4 % n == 0 )) || batch=$((8 * n))
    local cfg="$results/demo-$n.json"
    sed -e "0,/{/s//{\"device\": \"cuda\", /" -e "s|\"\.\./data/|\"$data/|g" \
        -e "s/\"train_batch_size\": 32/\"train_batch_size\": $batch/" "$config" > "$cfg"
    echo "== demo on $n GPU(s)"
    timeout "${DSLAUNCH_GPU_PROGRAM_TIMEOUT:-300}" "$bin/dslaunch" --log_dir "$results/logs" --nproc_per_node "$n" \
      "$cfg" 2>&1 | tee "$results/demo-$n.txt" || status=1
  done
  return "$status"
}

# The table of what ran (markdown), from the results directory.
summary() {  # summary RESULTS_DIR
  local results="$1" f
  echo "| check | result |"
  echo "|---|---|"
  for f in "$results"/*_test.txt; do
    [[ -e "$f" ]] || continue
    echo "| $(basename "$f" .txt) | $(grep -h 'test cases:' "$f" | tail -1 | sed -e 's/^\[doctest\] //' -e 's/ *| */, /g' | tr -s ' ') |"
  done
  for f in "$results"/*_bench.txt; do
    [[ -e "$f" ]] || continue
    local line; line="$(grep -h -E '^gpt_cuda_bench:' "$f" | tail -1 || true)"
    echo "| $(basename "$f" .txt) | ${line:-ran: $(basename "$f")} |"
  done
  for f in "$results"/demo-*.txt; do
    [[ -e "$f" ]] || continue
    local dev last val
    dev="$(grep -h -o 'device: cuda:0 ([^)]*)' "$f" | head -1 || true)"
    last="$(grep -h -E '\[rank 0\] step [0-9]+ \| loss' "$f" | tail -1 |
            sed -E 's/.*(step [0-9]+) \| (loss [0-9.]+) .*\| ([0-9]+ tokens\/s) .*/\1: \2, \3/' || true)"
    val="$(grep -h 'validation loss' "$f" | tail -1 | sed -E 's/.*(validation loss [0-9.]+).*/\1/' || true)"
    echo "| $(basename "$f" .txt) | ${dev:-no device line}; ${last:-no step}; ${val:-no validation} |"
  done
}

case "${1:-}" in
  --bundle)
    out="${2:?usage: scripts/gpu-check.sh --bundle DIR}"
    cd "$(dirname "$0")/.."
    build_dir="${DSLAUNCH_GPU_BUILD_DIR:-build-gpu}"
    build "$build_dir"
    rm -rf "$out" && mkdir -p "$out/lib"
    for p in $(gpu_programs) $(worker_programs); do
      cp "$build_dir/$p" "$out/" && strip --strip-debug "$out/$(basename "$p")"
      # Every library outside glibc, the C++ runtime and the CUDA toolkit travels along. The C++
      # runtime stays behind: the GPU machine's own is newer, and the CUDA libraries there may need
      # symbols that this Debian 12 one lacks.
      ldd "$build_dir/$p" | awk '/=> \// {print $3}' | while read -r lib; do
        case "$lib" in
          */libc.so*|*/libm.so*|*/libpthread.so*|*/libdl.so*|*/librt.so*|*/ld-linux*) ;;
          */libstdc++.so*|*/libgcc_s.so*) ;;
          */libcuda.so*|*/libcudart.so*|*/libcublas*|*/libnccl.so*|/usr/local/cuda*) ;;
          *) cp -Ln "$lib" "$out/lib/" ;;
        esac
      done
    done
    mkdir -p "$out/data" && cp data/fortunes.train.bin data/fortunes.val.bin "$out/data/"
    cp configs/gpt-demo.json "$out/"
    cp "$0" "$out/gpu-check.sh"
    du -sh "$out"
    # The libraries take 47 MB and the whole some 80 MB, past the 64 MiB a lent machine's call may
    # carry: the archive (about 27 MB) is what travels.
    tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
    du -sh "$out.tar.gz"
    ;;
  --run)
    dir="$(cd "${2:?usage: gpu-check.sh --run DIR}" && pwd)"
    export LD_LIBRARY_PATH="$dir/lib:$(cuda_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    results="${OUT:-$dir/results}"
    status=0
    run_programs "$dir" "$results" || status=1
    run_demo "$dir" "$dir/data" "$dir/gpt-demo.json" "$results" || status=1
    summary "$results"
    exit "$status"
    ;;
  "")
    cd "$(dirname "$0")/.."
    build_dir="${DSLAUNCH_GPU_BUILD_DIR:-build-gpu}"
    build "$build_dir"
    export LD_LIBRARY_PATH="$(cuda_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    status=0
    DSLAUNCH_REQUIRE=gpu ctest --test-dir "$build_dir" -L gpu --output-on-failure || status=1
    run_programs "$build_dir" "$build_dir/gpu-results" bench-only || status=1
    run_demo "$build_dir/bin" "$PWD/data" configs/gpt-demo.json "$build_dir/gpu-results" || status=1
    summary "$build_dir/gpu-results"
    exit "$status"
    ;;
  *)
    echo "usage: scripts/gpu-check.sh [--bundle DIR | --run DIR]" >&2
    exit 2
    ;;
esac
