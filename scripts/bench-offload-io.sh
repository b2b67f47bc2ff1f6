#!/usr/bin/env bash
# Offload I/O yardsticks (docs/offload.md, docs/benchmarks.md "Offload I/O"): the disk's
# sequential write and read rates, plain O_DIRECT and through the swap ring (io_uring and
# pread/pwrite), a STREAM triad, the bundled AdamW update in GB/s of state, and, where
# python3-torch is installed, torch.optim.AdamW (foreach and not) on the same sizes, one thread
# each. Prints the programs' output, then Markdown for docs/benchmarks.md.
#
#   scripts/bench-offload-io.sh [DIR] [MIB]   (default: /var/tmp, 1024 MiB per pass)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/var/tmp}"
mib="${2:-1024}"
sizes=(1048576 16777216 67108864)
ninja -C build swap_bench optimizer_bench >/dev/null

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
{
  echo "== disk: $dir"
  build/bin/swap_bench --dir "$dir" --mib "$mib"
  if [[ -d /dev/shm ]]; then
    echo "== tmpfs: /dev/shm (the ring's ceiling without a disk)"
    build/bin/swap_bench --dir /dev/shm --mib 256 --triad_mib 16 --iters 3
  fi
  echo "== optimizer"
  OMP_NUM_THREADS=1 build/bin/optimizer_bench --sizes "${sizes[@]}"
  # Debian's python3-torch is for /usr/bin/python3, which a pyenv or venv python3 may hide.
  torch_python=""
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import torch' 2>/dev/null; then torch_python="$py"; break; fi
  done
  if [[ -n "$torch_python" ]]; then
    "$torch_python" - "${sizes[@]}" <<'PY'
import statistics, sys, time, torch
torch.set_num_threads(1)
# The same state as optimizer_bench: fp32 parameter, gradient and two moments, 16 bytes/element.
# The elements are split into tensors of 1 Mi elements (a model's parameter list), which is
# what foreach batches.
CHUNK = 1 << 20
for n in map(int, sys.argv[1:]):
    for foreach in (False, True):
        params = [torch.nn.Parameter(torch.randn(min(CHUNK, n - i))) for i in range(0, n, CHUNK)]
        for p in params:
            p.grad = torch.randn_like(p) * 0.1
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=foreach)
        rates = []
        for i in range(6):
            t = time.perf_counter()
            opt.step()
            s = time.perf_counter() - t
            if i > 0:
                rates.append(16 * n / s / 1e9)
        gbps = statistics.median(rates)
        print(f"torch.adamw{'.foreach' if foreach else ''} {n:10d} elements  {gbps:8.3f} GB/s  {16 / gbps:7.3f} ns/element")
PY
  else
    echo "torch: python3-torch not installed (scripts/setup.sh --bench); no comparison"
  fi
} | tee "$out"

python3 - "$out" "$dir" <<'PY'
import datetime, platform, re, sys
text = open(sys.argv[1]).read()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
import os
print(f"\nMachine: {os.cpu_count()} vCPU {cpu}, {platform.system()} {platform.release()}. Date: {datetime.date.today()}.\n")
sections = re.split(r"^== ", text, flags=re.M)
for s in sections[1:]:
    title, _, body = s.partition("\n")
    rows = re.findall(r"^(\S.*?)\s+([0-9.]+) GB/s", body, flags=re.M)
    rows = [(re.sub(r"\s+", " ", name), gbps) for name, gbps in rows]
    if not rows:
        continue
    print(f"| {title} | GB/s |\n|---|---|")
    for name, gbps in rows:
        print(f"| {name.strip()} | {gbps} |")
    print()
PY
