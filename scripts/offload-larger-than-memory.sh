#!/usr/bin/env bash
# A model larger than memory (docs/offload.md, "Larger than memory"): a gpt whose model states
# (16 bytes per parameter with bf16 and Adam) are at least 4x a memory cap set with a cgroup,
# trained twice under that cap on one rank:
#   (a) in memory: stopped (the memory check, which reads the cgroup's limit, refuses it before
#       allocating; without the check the kernel would kill it);
#   (b) with the optimizer state and the parameters offloaded to NVMe (ZeRO-Infinity's keys):
#       it trains, and its loss falls.
# Prints the peak memory of the cgroup (memory.max_usage_in_bytes) against the cap. Root and the
# cgroup v1 memory controller (tests/support/requirements.sh: "cgroup_memory"), else skipped.
#
#   scripts/offload-larger-than-memory.sh [CAP_MIB] [N_LAYER] [N_EMBD] [STEPS] [MIN_RATIO]
#       (defaults 920 36 768 4 4: 255M parameters, 3.8 GiB of model states, at least 4x the cap)
#
# What remains in memory with everything offloaded: the 16-bit gradient of the owned slice (2 bytes
# per parameter at one rank), the activations, and buffers of fixed size (docs/offload.md, "Larger
# than memory").
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/support/requirements.sh
source tests/support/memory_cgroup.sh
cap_mib="${1:-920}"
n_layer="${2:-36}"
n_embd="${3:-768}"
steps="${4:-4}"
min_ratio="${5:-4}"

memory_cgroup_require
bin="${DSLAUNCH_BIN_DIR:-build/bin}"  # CTest passes its build's
[[ -x "$bin/dslaunch" && -x "$bin/dslaunch-worker" ]] || { echo "build first (scripts/build.sh)" >&2; exit 2; }
[[ -f data/fortunes.train.bin ]] || scripts/prepare-data.sh >/dev/null

work="$(mktemp -d /var/tmp/dslaunch-offload-XXXXXX)"
cg="$memory_cgroup_root/dslaunch-offload-$$"
cleanup() {
  memory_cgroup_remove "$cg"
  rm -rf "$work"
}
trap cleanup EXIT
disk_space_require "$work" $((4 << 30)) "the optimizer state and parameters swapped to disk"

python3 - "$work" "$n_layer" "$n_embd" "$steps" <<'PY'
import json, os, sys
work, n_layer, n_embd, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = os.path.abspath("data")
base = {
    "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "sub_group_size": 1000000, "reduce_bucket_size": 5000000,
                          "allgather_bucket_size": 5000000, "stage3_prefetch_bucket_size": 5000000,
                          "stage3_param_persistence_threshold": 0},
    "steps_per_print": 1, "seed": 1337,
    "model": {"type": "gpt", "n_layer": n_layer, "n_head": 12, "n_embd": n_embd, "block_size": 64,
              "vocab_size": 256},
    "data": {"train": data + "/fortunes.train.bin", "val": data + "/fortunes.val.bin"},
    "train": {"steps": steps, "eval_interval": 0, "eval_steps": 1, "sample_tokens": 0},
}
json.dump(base, open(os.path.join(work, "in-memory.json"), "w"), indent=1)
off = json.loads(json.dumps(base))
swap = os.path.join(work, "swap")
os.makedirs(swap)
off["zero_optimization"]["offload_optimizer"] = {"device": "nvme", "nvme_path": swap, "buffer_count": 4}
off["zero_optimization"]["offload_param"] = {"device": "nvme", "nvme_path": swap, "buffer_count": 5,
                                             "max_in_cpu": 0}
json.dump(off, open(os.path.join(work, "offloaded.json"), "w"), indent=1)
PY

# run NAME: dslaunch with one rank inside a fresh cgroup capped at cap_mib; prints its output and
# the group's peak; returns dslaunch's exit code.
run() {
  local name="$1" rc=0
  memory_cgroup_run "$cg" $((cap_mib * 1024 * 1024)) \
    "$bin/dslaunch" --log_dir "$work/logs" --job_id "$name" --nproc_per_node 1 "$work/$name.json" \
    > "$work/$name.out" 2>&1 || rc=$?
  peak=$memory_cgroup_peak
  sed 's/^/    /' "$work/$name.out" | tail -n 25
  echo "  $name: exit $rc, peak memory of the cgroup $((peak / 1024 / 1024)) MiB against a cap of $cap_mib MiB"
  return $rc
}

echo "== (a) in memory under a $cap_mib MiB cap"
if run in-memory; then
  echo "FAIL: the in-memory run trained under the cap: the model is not larger than memory" >&2
  exit 1
fi
echo "== (b) optimizer state and parameters on NVMe ($work/swap) under the same cap"
run offloaded || { echo "FAIL: the offloaded run did not train under the cap" >&2; exit 1; }
python3 - "$work/logs/offloaded/metrics.jsonl" "$cap_mib" "$min_ratio" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
start = next(r for r in records if r["event"] == "start")
losses = [r["loss"] for r in records if r["event"] == "step"]
states = 16 * start["parameters"]
cap = int(sys.argv[2]) * 2**20
print(f"  {start['parameters']:,} parameters: model states {states / 2**20:.0f} MiB = {states / cap:.1f}x the cap")
print(f"  losses: {' '.join(f'{l:.4f}' for l in losses)}")
if states < float(sys.argv[3]) * cap:
    sys.exit(f"FAIL: the model states are less than {sys.argv[3]}x the cap")
if not losses[-1] < losses[0]:
    sys.exit("FAIL: the loss did not fall")
PY
if compgen -G "$work/swap/*/*.swp" > /dev/null || compgen -G "$work/swap/*.swp" > /dev/null; then
  echo "FAIL: swap files left after the run: $(ls -R "$work/swap")" >&2
  exit 1
fi
echo "ok: the offloaded run trained a model at least ${min_ratio}x larger than its memory cap, and left no swap files"
