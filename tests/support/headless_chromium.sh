#!/usr/bin/env bash
# Headless Chromium for the browser tier (docs/testing.md): loads a page served on this machine,
# lets its scripts run, and prints the DOM or takes a screenshot. Flags keep Chromium off the
# network (this machine's network is closed: background connections are refused, many at a time)
# and out of the user's profile (a fresh --user-data-dir, removed afterwards).
#
#   tests/support/headless_chromium.sh dom URL [BUDGET_MS]              prints the DOM
#   tests/support/headless_chromium.sh screenshot URL FILE [WIDTH,HEIGHT] [BUDGET_MS]
#
# BUDGET_MS: virtual time the page's scripts get before the DOM is taken (default 3000).
# Exits 2 when Chromium is not installed (callers skip through tests/support/requirements.sh).
set -euo pipefail
chromium="${DSLAUNCH_CHROMIUM:-/usr/bin/chromium}"
[[ -x "$chromium" ]] || { echo "headless_chromium.sh: $chromium not found (scripts/setup.sh installs Debian's chromium)" >&2; exit 2; }
mode="${1:?usage: headless_chromium.sh dom|screenshot URL ...}"
url="${2:?URL}"
profile="$(mktemp -d /tmp/dslaunch-chromium-XXXXXX)"
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --disable-dev-shm-usage --user-data-dir="$profile")
case "$mode" in
  dom)
    "$chromium" "${flags[@]}" --virtual-time-budget="${3:-3000}" --dump-dom "$url" 2>/dev/null ;;
  screenshot)
    file="${3:?FILE}"
    "$chromium" "${flags[@]}" --virtual-time-budget="${5:-3000}" --hide-scrollbars --window-size="${4:-1280,900}" \
      --screenshot="$file" "$url" >/dev/null 2>&1
    [[ -s "$file" ]] || { echo "headless_chromium.sh: no screenshot written to $file" >&2; exit 1; } ;;
  *) echo "headless_chromium.sh: unknown mode '$mode' (dom or screenshot)" >&2; exit 2 ;;
esac
