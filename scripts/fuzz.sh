#!/usr/bin/env bash
# Longer runs of the bounded randomized ("fuzz") tests of the unit tier: every test case defined
# in a tests/**/*_fuzz_test.cc, with DSLAUNCH_FUZZ_CASES times its default case count, from
# several seeds (tests/support/fuzz_cases.h). A failure prints the seed and the case to replay:
#   DSLAUNCH_FUZZ_SEED=S DSLAUNCH_FUZZ_CASES=M build/tests/EXE -sf='*_fuzz_test.cc'
#
#   scripts/fuzz.sh [MULTIPLIER [SEEDS]]     defaults: 100 and 8 (seeds 1..8)
#
# Builds first (scripts/build.sh). DSLAUNCH_BUILD_DIR chooses the build, e.g. a sanitizer build:
#   DSLAUNCH_BUILD_DIR=build-asan scripts/build.sh -DDSLAUNCH_SANITIZE=address,undefined
#   DSLAUNCH_BUILD_DIR=build-asan scripts/fuzz.sh 20 4
set -euo pipefail
cd "$(dirname "$0")/.."
multiplier="${1:-100}"
seeds="${2:-8}"
build_dir="${DSLAUNCH_BUILD_DIR:-build}"
scripts/build.sh >/dev/null

# Every test executable; those without fuzz cases run none under the filter.
mapfile -t exes < <(find "$build_dir/tests" -maxdepth 1 -type f -executable -name '*_test' | sort)
failed=0
ran=0
start=$SECONDS
for exe in "${exes[@]}"; do
  # Executables without fuzz cases report "0 passed" under the filter and are skipped quietly.
  for seed in $(seq 1 "$seeds"); do
    out=$(DSLAUNCH_FUZZ_SEED="$seed" DSLAUNCH_FUZZ_CASES="$multiplier" "$exe" -sf='*_fuzz_test.cc' 2>&1) || {
      echo "$out"
      echo "fuzz: FAILED: DSLAUNCH_FUZZ_SEED=$seed DSLAUNCH_FUZZ_CASES=$multiplier $exe -sf='*_fuzz_test.cc'"
      failed=$((failed + 1))
      continue
    }
    cases=$(sed -n 's/^\[doctest\] test cases: *\([0-9]*\) |.*/\1/p' <<<"$out")
    [[ "${cases:-0}" -gt 0 ]] || break
    ran=$((ran + cases))
    [[ $seed -eq 1 ]] && echo "fuzz: $(basename "$exe"): $cases test cases per seed"
  done
done
echo "fuzz: $ran test-case runs (x$multiplier cases, seeds 1..$seeds) in $((SECONDS - start)) s; $failed failed"
[[ $failed -eq 0 ]]
