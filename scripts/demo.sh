#!/usr/bin/env bash
# Sets up, builds and runs the main job on this machine: the bundled runtime trains the small GPT
# of configs/gpt-demo.json on 2 local ranks on the bundled data (the English text of Debian's
# fortunes package), printing the loss as it falls and the validation loss at the end.
#
# A first run in minutes: only the packages the build needs (setup.sh --demo) and only the three
# programs the demo runs (the launcher, the agent, the worker); scripts/test.sh installs and builds
# the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --demo
# A build directory configured here compiles without debug information (a third less compile
# time); one configured before keeps its settings.
configure=()
[[ -f "${DSLAUNCH_BUILD_DIR:-build}/build.ninja" ]] || configure=(-DDSLAUNCH_DEBUG_INFO=OFF)
DSLAUNCH_BUILD_TARGETS="dslaunch dslaunch-agent dslaunch-worker" scripts/build.sh "${configure[@]}"
[[ -f data/fortunes.train.bin && -f data/fortunes.val.bin ]] || scripts/prepare-data.sh
exec build/bin/dslaunch --nproc_per_node 2 configs/gpt-demo.json
