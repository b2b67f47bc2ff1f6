#!/usr/bin/env bash
# Offload buffers sized to fit (docs/offload.md, "Buffers sized to fit"): the issue's 101M-parameter
# gpt (8 x 1024) at ZeRO stage 3, fp16, optimizer state and parameters on NVMe, with no buffer key
# in its train.json, on one rank inside a cgroup capped at 600 MB:
#   (a) it trains: the keys left out are sized to the cgroup's room (DeepSpeed's defaults would need
#       about 6 GiB), the start-up line says what was chosen, and the rank's peak (VmHWM) stays under
#       its estimate and the cgroup's peak under the cap;
#   (b) the same run with an explicit zero_optimization.sub_group_size of 1e9 (DeepSpeed's default,
#       written out) is refused before training, naming the key and a value that would fit.
# Root and the cgroup v1 memory controller (tests/support/requirements.sh: "cgroup_memory"), else
# skipped.
#
#   scripts/offload-sized-to-fit.sh [CAP_BYTES] [STEPS]     (defaults 600000000 2)
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/support/requirements.sh
source tests/support/memory_cgroup.sh
cap="${1:-600000000}"
steps="${2:-2}"

memory_cgroup_require
bin="${DSLAUNCH_BIN_DIR:-build/bin}"  # CTest passes its build's
[[ -x "$bin/dslaunch" && -x "$bin/dslaunch-worker" ]] || { echo "build first (scripts/build.sh)" >&2; exit 2; }

work="$(mktemp -d /var/tmp/dslaunch-sized-XXXXXX)"
cg="$memory_cgroup_root/dslaunch-sized-$$"
cleanup() {
  memory_cgroup_remove "$cg"
  rm -rf "$work"
}
trap cleanup EXIT
disk_space_require "$work" $((2 << 30)) "the optimizer state and parameters swapped to disk"

# Any text will do: a few steps of a batch of one sequence.
"$bin/dslaunch-worker" prepare-text /usr/share/common-licenses/GPL-3 "$work/train.bin" > /dev/null
mkdir "$work/swap"
python3 - "$work" "$steps" <<'PY'
import json, os, sys
work, steps = sys.argv[1], int(sys.argv[2])
swap = os.path.join(work, "swap")
base = {
    "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "fp16": {"enabled": True},
    "zero_optimization": {"stage": 3,
                          "offload_optimizer": {"device": "nvme", "nvme_path": swap},
                          "offload_param": {"device": "nvme", "nvme_path": swap}},
    "steps_per_print": 1, "seed": 1,
    "model": {"type": "gpt", "n_layer": 8, "n_head": 16, "n_embd": 1024, "block_size": 128, "vocab_size": 256},
    "data": {"train": os.path.join(work, "train.bin")},
    "train": {"steps": steps, "eval_interval": 0, "sample_tokens": 0},
}
json.dump(base, open(os.path.join(work, "left-out.json"), "w"), indent=1)
base["zero_optimization"]["sub_group_size"] = 1000000000
json.dump(base, open(os.path.join(work, "explicit.json"), "w"), indent=1)
PY

# run NAME: dslaunch with one rank inside a fresh cgroup capped at $cap bytes (no swap); its output
# in $work/NAME.out, the group's peak in $peak; returns dslaunch's exit code.
run() {
  local name="$1" rc=0
  memory_cgroup_run "$cg" "$cap" \
    "$bin/dslaunch" --log_dir "$work/logs" --job_id "$name" --nproc_per_node 1 "$work/$name.json" \
    > "$work/$name.out" 2>&1 || rc=$?
  peak=$memory_cgroup_peak
  grep -v '\] step ' "$work/$name.out" | sed 's/^/    /' | tail -n 12
  echo "  $name: exit $rc, peak memory of the cgroup $peak bytes against a cap of $cap bytes"
  return $rc
}

echo "== (a) no buffer key set, under a cap of $cap bytes"
run left-out || { echo "FAIL: the run with the buffer keys left out did not train under the cap" >&2; exit 1; }
out="$work/left-out.out"
grep -q "offload buffers for .* per rank (DeepSpeed's defaults do not fit): zero_optimization.sub_group_size" "$out" ||
  { echo "FAIL: no start-up line saying which buffer sizes were chosen" >&2; exit 1; }
[[ $(grep -c '\] step [0-9]* | loss' "$out") -eq $steps ]] || { echo "FAIL: not $steps steps" >&2; exit 1; }
python3 - "$out" "$peak" "$cap" <<'PY'
import re, sys
text, cgroup_peak, cap = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
m = re.search(r"memory: peak .* \(VmHWM (\d+) bytes\), estimated .* \((\d+) bytes\)", text)
if not m:
    sys.exit("FAIL: no peak line")
vmhwm, estimate = int(m.group(1)), int(m.group(2))
print(f"  rank 0: VmHWM {vmhwm / 2**20:.1f} MiB, estimate {estimate / 2**20:.1f} MiB; cgroup peak "
      f"{cgroup_peak / 2**20:.1f} MiB of {cap / 2**20:.1f} MiB")
if vmhwm > estimate:
    sys.exit("FAIL: the peak is above the estimate")
if cgroup_peak > cap:
    sys.exit("FAIL: the cgroup's peak is above its cap")
PY

echo "== (b) zero_optimization.sub_group_size 1e9 written out, under the same cap"
if run explicit; then
  echo "FAIL: an explicit sub_group_size that cannot fit was not refused" >&2
  exit 1
fi
grep -q "explicit.json: zero_optimization.sub_group_size: 1000000000 cannot fit, set it to at most [0-9]* (or to \"auto\" to have it sized)" \
  "$work/explicit.out" || { echo "FAIL: the refusal does not name the key and a value that would fit" >&2; exit 1; }
if grep -q '\] step ' "$work/explicit.out"; then echo "FAIL: it trained before the refusal" >&2; exit 1; fi
echo "ok: the buffers left out were sized to fit the cap, and an explicit value that cannot fit was refused"
