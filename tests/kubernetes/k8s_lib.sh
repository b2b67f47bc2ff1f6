#!/usr/bin/env bash
# Pods of a deploy/kubernetes/ manifest played by podman containers, each in a network namespace
# of its own on a bridge (the `kubernetes` tier, docs/kubernetes.md, "Tests"). Sourced by
# tests/kubernetes/kubernetes_test.sh after tests/container/container_lib.sh (image, fail,
# wait_for, required).
#
# Network: bridge dslk8sbr0 at 172.30.79.1/24; pod slot n is namespace dslk8s-n with eth0 at
# 172.30.79.(10+n) (a replacement pod gets a fresh slot: a new address, as a new pod has). The
# names are this tier's own, apart from the cluster tier's dsln*/dslbr0, so the two never meet.

readonly K8S_BRIDGE=dslk8sbr0
readonly K8S_SUBNET=172.30.79
readonly K8S_NS_PREFIX=dslk8s-
readonly K8S_VETH_PREFIX=dslk8sv
readonly K8S_FIRST_HOST=10
readonly K8S_PODS="$here/tests/support/k8s_pods.py"

# Exits 0 with the skip token (or 1 where the tier is required) without root, podman, ip netns
# or python3-yaml.
require_k8s_or_skip() {
  local why=""
  if [[ $EUID -ne 0 ]]; then
    why="the kubernetes tier needs root (network namespaces, rootful podman)"
  elif ! command -v podman >/dev/null 2>&1; then
    why="podman is not installed (scripts/setup.sh installs it)"
  elif ! ip netns list >/dev/null 2>&1; then
    why="'ip netns' does not work here"
  elif ! python3 -c 'import yaml' 2>/dev/null; then
    why="python3-yaml is missing (scripts/setup.sh installs it)"
  fi
  [[ -z "$why" ]] && return 0
  skip_or_fail kubernetes "$why"
}

k8s_addr() { echo "${K8S_SUBNET}.$((K8S_FIRST_HOST + $1))"; }

k8s_bridge_up() {
  if ! ip link show "$K8S_BRIDGE" >/dev/null 2>&1; then
    ip link add "$K8S_BRIDGE" type bridge
    ip addr add "${K8S_SUBNET}.1/24" dev "$K8S_BRIDGE"
  fi
  ip link set "$K8S_BRIDGE" up
}

# k8s_netns_up SLOT: namespace dslk8s-SLOT with its address, joined to the bridge.
k8s_netns_up() {
  local slot=$1 ns="${K8S_NS_PREFIX}$1" veth="${K8S_VETH_PREFIX}$1"
  ip netns del "$ns" 2>/dev/null || true
  ip link del "$veth" 2>/dev/null || true
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$K8S_BRIDGE" up
  ip -n "$ns" addr add "$(k8s_addr "$slot")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
}

# Removes every namespace and veth of this tier, and the bridge. Safe to repeat.
k8s_network_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${K8S_NS_PREFIX}" || true); do
    ip link del "${K8S_VETH_PREFIX}${ns#"$K8S_NS_PREFIX"}" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$K8S_BRIDGE" 2>/dev/null || true
}

# k8s_pod_count MANIFEST
k8s_pod_count() {
  python3 "$K8S_PODS" summary "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'
}

# k8s_hosts MANIFEST SLOT...: NAME=IP,... for every DNS name of pod i at the address of the i-th
# SLOT (what the headless Service's DNS answers).
k8s_hosts() {
  local manifest=$1 slot addresses=""
  shift
  for slot in "$@"; do addresses+="${addresses:+,}$(k8s_addr "$slot")"; done
  python3 "$K8S_PODS" hosts "$manifest" --addresses "$addresses"
}

# k8s_start_pod MANIFEST INDEX SLOT HOSTS NAME WORKDIR [OVERRIDE_JSON]: starts pod INDEX of
# MANIFEST as container NAME in the namespace of SLOT (made here), its volumes under WORKDIR
# (WORKDIR/pvc is the shared PersistentVolumeClaim root). K8S_POD_IMAGE, when set, is the image
# instead of the tier's; K8S_REPLACE_ARG="OLD NEW" replaces one container argument (k8s_pods.py).
k8s_start_pod() {
  local manifest=$1 index=$2 slot=$3 hosts=$4 name=$5 workdir=$6 override=${7:-}
  k8s_netns_up "$slot"
  local -a argv replace=()
  if [[ -n "${K8S_REPLACE_ARG:-}" ]]; then replace=("--replace-arg=${K8S_REPLACE_ARG% *}" "--replacement=${K8S_REPLACE_ARG#* }"); fi
  mapfile -d '' argv < <(python3 "$K8S_PODS" podman-args "$manifest" "$index" --image "${K8S_POD_IMAGE:-$image}" \
    --netns "/run/netns/${K8S_NS_PREFIX}${slot}" --address "$(k8s_addr "$slot")" --hosts "$hosts" \
    --pvc-root "$workdir/pvc" --files-root "$workdir/files/$name" --name "$name" \
    ${override:+--override-json "$override"} "${replace[@]}")
  [[ ${#argv[@]} -gt 4 ]] || fail "k8s_pods.py gave no podman arguments for pod $index of $manifest"
  podman run -d "${argv[@]}" >/dev/null
}

# The exit code of a container once it has ended, waiting at most $2 seconds.
k8s_exit_code() {
  local name=$1 limit=$2
  local code rc=0
  code="$(timeout "$limit" podman wait "$name" 2>&1)" || rc=$?
  if ((rc == 124)); then fail "container $name did not end within $limit s"; fi
  ((rc == 0)) || fail "podman wait $name: $code (removed by someone else?)"
  echo "$code"
}
