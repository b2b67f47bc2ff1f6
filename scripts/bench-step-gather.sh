#!/usr/bin/env bash
# The cost of the per-step all-gather of every rank's step time (rank_step_ms, docs/engine.md
# "Metrics"): the same training job run by two builds of dslaunch, one without the gather (BASE,
# e.g. a build of the commit before it) and this one, alternately, on 2 local ranks, one thread per
# rank. The job is a small mlp (layers 784-64-10, global batch 32) whose steps take about a
# millisecond, where one more collective per step weighs most; a GPT step is hundreds of times
# longer. Throughput is the step lines' samples/s over steps 101-400 (the first 100 are warm-up).
# Prints each run and the ratio of the medians.
#
#   scripts/bench-step-gather.sh BASE_BIN_DIR [repeats]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:?usage: scripts/bench-step-gather.sh BASE_BIN_DIR [repeats]}"
repeats="${2:-5}"
new="${DSLAUNCH_BUILD_DIR:-build}/bin"
for b in "$base" "$new"; do
  [[ -x "$b/dslaunch" && -x "$b/dslaunch-worker" ]] || { echo "no dslaunch and dslaunch-worker in $b" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$new/dslaunch-worker" make-digits "$work/digits" --train 2048 --val 64 >/dev/null
cat > "$work/train.json" <<JSON
{
  "train_batch_size": 32, "train_micro_batch_size_per_gpu": 16,
  "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
  "steps_per_print": 100, "seed": 7,
  "model": {"type": "mlp", "layers": [784, 64, 10]},
  "data": {"format": "idx", "train": "$work/digits/train-images.idx", "train_labels": "$work/digits/train-labels.idx",
           "val": "$work/digits/val-images.idx", "val_labels": "$work/digits/val-labels.idx"},
  "train": {"steps": 400, "eval_interval": 0, "eval_steps": 1}
}
JSON
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
rate() {  # samples/s over steps 101-400: the mean of the three step lines after the warm-up
  "$1/dslaunch" --nproc_per_node 2 --log_dir "$work/logs" "$work/train.json" 2>&1 |
    sed -n 's/^\[rank 0\] step \([234]00\) |.* | \([0-9]*\) samples\/s |.*/\2/p' |
    awk '{ s += $1; n++ } END { if (n != 3) exit 1; printf "%.0f\n", s / n }'
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
base_rates=() new_rates=()
for ((i = 1; i <= repeats; i++)); do
  b="$(rate "$base")"; n="$(rate "$new")"
  base_rates+=("$b"); new_rates+=("$n")
  echo "run $i: without the gather $b samples/s, with it $n samples/s"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mb="$(median "${base_rates[@]}")"; mn="$(median "${new_rates[@]}")"
awk -v b="$mb" -v n="$mn" 'BEGIN { printf "median: without %s, with %s samples/s: ratio with/without %.3f\n", b, n, n / b }'
