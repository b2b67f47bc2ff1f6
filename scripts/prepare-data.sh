#!/usr/bin/env bash
# Builds the bundled demo data: the English text of Debian's `fortunes` package (installed by
# scripts/setup.sh), tokenized byte by byte into llm.c-format shards, the last 10% for validation:
#   data/fortunes.train.bin, data/fortunes.val.bin
# and synthetic digit images for the mlp model (docs/data.md): data/digits/*.idx
set -euo pipefail
cd "$(dirname "$0")/.."
fortunes_dir=/usr/share/games/fortunes
[[ -d "$fortunes_dir" ]] || { echo "prepare-data: $fortunes_dir missing: run scripts/setup.sh" >&2; exit 1; }
# The text files are those without an extension (.dat and .u8 are indexes and links).
mapfile -t inputs < <(find "$fortunes_dir" -maxdepth 1 -type f ! -name '*.*' | LC_ALL=C sort)
[[ ${#inputs[@]} -gt 0 ]] || { echo "prepare-data: no fortune files in $fortunes_dir" >&2; exit 1; }
mkdir -p data
build/bin/dslaunch-worker prepare-text "${inputs[@]}" data/fortunes.train.bin --val data/fortunes.val.bin --val_fraction 0.1
# Synthetic 28x28 digits in IDX format for the mlp model (configs/mlp-digits.json).
build/bin/dslaunch-worker make-digits data/digits --train 60000 --val 10000
