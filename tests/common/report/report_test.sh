#!/usr/bin/env bash
# report.html (docs/observability.md, "Report at the end") through the real binaries.
#
#   report_test.sh cli      (proc tier) `dslaunch report JOB_DIR` on a hand-written metrics.jsonl:
#                           the report is written and its path printed; the errors for a missing
#                           directory and a directory without metrics.jsonl name the path; a program
#                           named report.py still launches.
#   report_test.sh browser  (browser tier) a 2-rank job of the bundled runtime (mlp on synthetic
#                           digits, 40 steps) writes report.html and prints its path; headless
#                           Chromium loads it and the DOM is checked (a point per step, a line per
#                           rank, the generation line), a screenshot kept under ARTIFACTS; then the
#                           same for the report `dslaunch report JOB_DIR` rebuilds. Chromium missing:
#                           skipped (tests/support/requirements.sh, requirement "chromium").
#
# Environment: DSLAUNCH_BIN_DIR (the build's bin/), DSLAUNCH_TEST_ARTIFACTS (where screenshots go).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
source "$root/tests/support/requirements.sh"
mode="${1:?usage: report_test.sh cli|browser}"
bin="${DSLAUNCH_BIN_DIR:-$root/build/bin}"
artifacts="${DSLAUNCH_TEST_ARTIFACTS:-$root/build/test-artifacts}"
[[ -x "$bin/dslaunch" && -x "$bin/dslaunch-worker" ]] || { echo "build first (scripts/build.sh)" >&2; exit 2; }
work="$(mktemp -d /tmp/dslaunch-report-test-XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail() { echo "report_test.sh $mode: $*" >&2; exit 1; }

# Runs a command, keeping its output in $out and its exit code in $rc.
run() { set +e; out="$("$@" 2>&1)"; rc=$?; set -e; }

cli_case() {
  local job="$work/job-7"
  mkdir -p "$job"
  {
    echo '{"event":"start","model":"mlp","parameters":10,"world_size":2,"zero_stage":0,"precision":"fp32"}'
    for s in 1 2 3; do echo "{\"event\":\"step\",\"step\":$s,\"loss\":2.$s,\"tokens_per_s\":100,\"rank_step_ms\":[1,2]}"; done
    echo '{"event":"step","step":4,"lo'   # a torn last line (rank 0 killed mid-write)
  } > "$job/metrics.jsonl"
  run "$bin/dslaunch" report "$job"
  [[ $rc -eq 0 ]] || fail "dslaunch report $job exited $rc: $out"
  grep -qx "report: $job/report.html" <<<"$out" || fail "no 'report: $job/report.html' line in: $out"
  grep -q "1 unreadable line" <<<"$out" || fail "no warning of the torn line in: $out"
  grep -q '<svg id="loss-chart"' "$job/report.html" || fail "$job/report.html has no loss chart"
  grep -q '1 line skipped as unreadable (first: line 5, not JSON)' "$job/report.html" || fail "torn line not noted"

  run "$bin/dslaunch" report "$work/nowhere"
  [[ $rc -eq 2 && "$out" == *"$work/nowhere: no such directory"* ]] || fail "missing dir: exit $rc: $out"
  mkdir "$work/empty"
  run "$bin/dslaunch" report "$work/empty"
  [[ $rc -eq 2 && "$out" == *"$work/empty/metrics.jsonl: no such file"* ]] || fail "no metrics: exit $rc: $out"
  run "$bin/dslaunch" report
  [[ $rc -eq 2 && "$out" == *"Usage: dslaunch report JOB_DIR"* ]] || fail "no JOB_DIR: exit $rc: $out"

  # A user program whose name starts with the subcommand's is still a program.
  echo 'print("report.py ran")' > "$work/report.py"
  run bash -c "cd '$work' && '$bin/dslaunch' --nproc_per_node 1 --log_dir '$work/logs' report.py"
  [[ $rc -eq 0 && "$out" == *"report.py ran"* ]] || fail "dslaunch report.py: exit $rc: $out"
  echo "report_test.sh cli: ok"
}

# Loads REPORT in Chromium: DOM checked, screenshot to artifacts/NAME.png.
check_in_browser() {
  local report="$1" name="$2"
  "$root/tests/support/headless_chromium.sh" dom "file://$report" > "$work/$name.dom" ||
    fail "headless Chromium could not load $report"
  python3 "$here/report_dom_check.py" "$work/$name.dom" 40 2 2 || fail "the DOM of $report is not the report expected"
  mkdir -p "$artifacts"
  "$root/tests/support/headless_chromium.sh" screenshot "file://$report" "$artifacts/$name.png" 1400,1000
  echo "screenshot: $artifacts/$name.png"
}

browser_case() {
  [[ -x "${DSLAUNCH_CHROMIUM:-/usr/bin/chromium}" ]] ||
    skip_or_fail chromium "Chromium is not installed (scripts/setup.sh installs Debian's chromium)"
  "$bin/dslaunch-worker" make-digits "$work/digits" --train 512 --val 128 >/dev/null
  cat > "$work/train.json" <<JSON
{
  "train_batch_size": 32, "train_micro_batch_size_per_gpu": 16,
  "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
  "steps_per_print": 10, "seed": 7,
  "model": {"type": "mlp", "layers": [784, 64, 10]},
  "data": {"format": "idx", "train": "$work/digits/train-images.idx", "train_labels": "$work/digits/train-labels.idx",
           "val": "$work/digits/val-images.idx", "val_labels": "$work/digits/val-labels.idx"},
  "train": {"steps": 40, "eval_interval": 20, "eval_steps": 2}
}
JSON
  run "$bin/dslaunch" --nproc_per_node 2 --log_dir "$work/logs" "$work/train.json"
  [[ $rc -eq 0 ]] || fail "the training job exited $rc: $out"
  # The worker's line, as the launcher shows it: "[rank 0] report: PATH".
  local report
  report="$(sed -n 's/^\[rank 0\] report: //p' <<<"$out")"
  [[ -n "$report" && -f "$report" ]] || fail "no '[rank 0] report: PATH' line naming a file in: $out"
  grep -q '"rank_step_ms":\[' "$(dirname "$report")/metrics.jsonl" || fail "no rank_step_ms in the step records"
  check_in_browser "$report" report
  rm "$report"
  run "$bin/dslaunch" report "$(dirname "$report")"
  [[ $rc -eq 0 && "$out" == "report: $report" ]] || fail "dslaunch report: exit $rc: $out"
  check_in_browser "$report" report-rebuilt
  echo "report_test.sh browser: ok"
}

case "$mode" in
  cli) cli_case ;;
  browser) browser_case ;;
  *) echo "report_test.sh: unknown mode '$mode' (cli or browser)" >&2; exit 2 ;;
esac
