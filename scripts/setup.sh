#!/usr/bin/env bash
# Installs the Debian packages dslaunch needs. Idempotent: packages already present are skipped,
# and `apt-get update` runs only when something must be installed.
#
#   scripts/setup.sh          build and test dependencies
#   scripts/setup.sh --demo   only what the build and scripts/demo.sh need
#   scripts/setup.sh --bench  also what the benchmarks compare against (pdsh; torchrun comes with python3-torch;
#                             BLIS and oneDNN for scripts/bench-blas.sh)
set -euo pipefail

# What the build and the demo need (scripts/demo.sh installs only these: a first run in minutes).
demo_packages=(
  # toolchain
  cmake ninja-build g++ ccache pkg-config
  # libraries
  libboost-dev nlohmann-json3-dev libcli11-dev doctest-dev libgloo-dev libssh-dev libopenblas-dev
  # swap files of offloaded state: io_uring (docs/offload.md)
  liburing-dev
  # the runtime's demo data: English text of the fortunes package (scripts/prepare-data.sh)
  fortunes
)
# What the test tiers add.
packages=(
  "${demo_packages[@]}"
  # the cluster tests: sshd in network namespaces
  openssh-server openssh-client iproute2
  # the slurm tests: a real Slurm on the namespaced cluster (scripts/slurm-cluster.sh); its
  # daemons are started by the tests only, with their own state, never as system services
  slurmctld slurmd slurm-client munge
  # tests run Python worker scripts, and a real PyTorch DDP script on the namespaced cluster
  python3 python3-torch
  # the container tier and scripts/build-image.sh: podman (with runc, which works on this kernel's
  # hybrid cgroups where crun does not) and a base image made from Debian packages (docs/containers.md)
  podman runc mmdebstrap uidmap
  # the kubernetes tier reads deploy/kubernetes/*.yaml (tests/support/k8s_pods.py)
  python3-yaml
  # the browser tier loads the live status page in headless Chromium; promtool (Debian ships it in
  # the prometheus package) checks /metrics (docs/observability.md)
  chromium prometheus
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(pdsh libblis-dev libdnnl-dev)
elif [[ "${1:-}" == "--demo" ]]; then
  packages=("${demo_packages[@]}")
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/setup.sh [--demo | --bench]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [[ $EUID -ne 0 ]]; then sudo=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
