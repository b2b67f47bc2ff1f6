#!/usr/bin/env bash
# The kubernetes tier (CTest label `kubernetes`, docs/kubernetes.md, "Tests"): the manifests of
# deploy/kubernetes/ run without a cluster. tests/support/k8s_pods.py does what the Job or JobSet
# controller and the kubelet would do for each pod (hostname, completion index, env with the
# downward API, $(VAR) in args, the Secret and ConfigMap volumes as the kubelet lays them out, the
# PersistentVolumeClaim as one host directory), and each pod runs as a podman container of the
# image (built by the container tier's fixture) in a network namespace of its own, with the
# headless Service's DNS names in /etc/hosts. The manifests' train.json is shortened by
# tests/kubernetes/train-short.json (a smaller model, 10 steps).
#
#   kubernetes_test.sh indexed-train   indexed-job.yaml: both pods exit 0, the checkpoint and the
#                                      metrics land on the shared volume
#   kubernetes_test.sh indexed-lost    indexed-job.yaml: /metrics of pod 0 scraped from outside it
#                                      (the PodMonitor's view); pod 1 killed mid-run: the host pod exits 75
#                                      (infrastructure, ignored by the podFailurePolicy); a new set
#                                      of pods, as the Job controller makes it, resumes from the
#                                      newest checkpoint and finishes with exit 0
#   kubernetes_test.sh elastic         indexed-job-elastic.yaml (3 pods, --nnodes 2:3), pod 2 killed
#                                      mid-run: the job goes on with pods 0 and 1; a replacement
#                                      pod 2 (a new address, as the Job controller makes it) rejoins,
#                                      and every pod of the end exits 0
#   kubernetes_test.sh jobset          jobset.yaml: both pods exit 0
#   kubernetes_test.sh jobset-lost     jobset.yaml, pod 0 (the host) killed mid-run: the other pod
#                                      exits 75 (it lost the job's host)
#   kubernetes_test.sh pytorchjob      pytorchjob-style.yaml (only PET_* variables): both pods exit 0
#   kubernetes_test.sh kubeflow        pytorchjob.yaml, the pods Kubeflow's operator makes (Master and
#                                      Worker, its PET_ variables): both exit 0
#   kubernetes_test.sh kubeflow-elastic  pytorchjob-elastic.yaml (elasticPolicy, 3 workers): all exit 0
#   kubernetes_test.sh kubeflow-lost   pytorchjob.yaml, the Worker killed mid-run: the Master exits 203
#                                      (PET_EXIT_CODES=kubeflow), which restartPolicy ExitCode retries
#   kubernetes_test.sh kubeflow-train-py  pytorchjob-gpu.yaml's pods from deploy/pytorch/Dockerfile
#                                      built on Debian's PyTorch (no PyTorch image can be pulled
#                                      here), one CPU worker per pod instead of the GPUs: the
#                                      user's train.py trains with Gloo over both pods, both exit 0
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/container/container_lib.sh
source "$here/tests/container/container_lib.sh"
# shellcheck source=tests/kubernetes/k8s_lib.sh
source "$here/tests/kubernetes/k8s_lib.sh"
require_k8s_or_skip
podman image exists "$image" || fail "image $image missing: the container_up fixture did not build it"

# Failure bounds on a loaded 2-core machine (not speed checks): a 10-step job of the small model
# takes seconds.
readonly kJobLimit=180
readonly kStepLimit=120       # until a given step is in metrics.jsonl
readonly kRejoinLimit=120     # until the replacement pod is a member again
# The elastic case's steps: enough for a shrink and a rejoin (a restart each) before the end.
readonly kElasticSteps=40

case_name="$1"
work="$(mktemp -d /tmp/dslaunch-k8s.XXXXXX)"
chmod 755 "$work"
# Not the container tier's prefix: its fixture's cleanup (podman rm -f of every container named
# with it) must not take this tier's pods away when both tiers run at once on one machine.
prefix="dslaunch-k8stest-${case_name}-$$-"
cleanup() {
  local c
  for c in $(podman ps -a --filter "name=^$prefix" --format '{{.Names}}' 2>/dev/null); do
    podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
  done
  k8s_network_down
  rm -rf "$work"
}
trap cleanup EXIT
k8s_network_down
k8s_bridge_up

# An override of train-short.json with more steps, for the cases that kill a pod mid-run.
long_override() {
  python3 - "$here/tests/kubernetes/train-short.json" "$1" >"$work/long.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["train"]["steps"] = int(sys.argv[2])
print(json.dumps(c))
PY
  echo "$work/long.json"
}

# start_all MANIFEST OVERRIDE: every pod i of MANIFEST in slot i; prints nothing.
start_all() {
  local manifest=$1 override=$2 n i
  n="$(k8s_pod_count "$manifest")"
  local -a slots=()
  for ((i = 0; i < n; i++)); do slots+=("$i"); done
  hosts="$(k8s_hosts "$manifest" "${slots[@]}")"
  for ((i = 0; i < n; i++)); do
    k8s_start_pod "$manifest" "$i" "$i" "$hosts" "${prefix}$i" "$work" "$override"
  done
}

# The job's newest metrics.jsonl on the shared volume (logs/POD_NAME/JOB_ID/: one per attempt).
metrics_file() {
  local files=("$work"/pvc/*/*/logs/*/*/metrics.jsonl)
  [[ -f "${files[0]}" ]] || return 1
  ls -t "${files[@]}" | head -1
}

# The largest step in metrics.jsonl so far (0 when none).
last_step() {
  local m
  m="$(metrics_file)" || { echo 0; return; }
  python3 -c '
import json, sys
steps = [json.loads(l).get("step", 0) for l in open(sys.argv[1]) if "\"event\":\"step\"" in l]
print(max(steps, default=0))' "$m"
}

at_step() { (($(last_step) >= $1)); }

# logs_have CONTAINER PATTERN: the container's output so far has a line matching PATTERN. (The
# output is read whole first: `podman logs | grep -q` fails under pipefail when grep stops early.)
logs_have() {
  local out
  out="$(podman logs "$1" 2>&1)"
  grep -q -- "$2" <<<"$out"
}

show_logs() {
  local c
  for c in $(podman ps -a --filter "name=^$prefix" --format '{{.Names}}' | sort); do
    echo "---- $c (exit $(podman inspect --format '{{.State.ExitCode}}' "$c"))"
    podman logs "$c" 2>&1 | tail -"${1:-25}"
  done
}

# expect_exit CONTAINER CODE
expect_exit() {
  local code
  code="$(k8s_exit_code "$1" "$kJobLimit")"
  if [[ "$code" != "$2" ]]; then
    show_logs 40
    fail "container $1 exited $code, not $2"
  fi
  echo "$1 exited $code"
}

# A whole job of MANIFEST, shortened: every pod exits 0 and the run's last step and checkpoint
# are on the shared volume.
train_all() {
  local manifest="$here/deploy/kubernetes/$1"
  local n i t0=$SECONDS
  n="$(k8s_pod_count "$manifest")"
  start_all "$manifest" "$here/tests/kubernetes/train-short.json"
  for ((i = 0; i < n; i++)); do expect_exit "${prefix}$i" 0; done
  show_logs 6
  local steps
  steps="$(last_step)"
  [[ "$steps" == 10 ]] || fail "the last step in metrics.jsonl is $steps, not 10"
  local latest=("$work"/pvc/*/*/checkpoints/latest)
  [[ -f "${latest[0]}" && "$(tr -d '[:space:]' <"${latest[0]}")" == global_step10 ]] ||
    fail "no global_step10 checkpoint on the shared volume: $(find "$work/pvc" -maxdepth 4 | head -20)"
  echo "$1: $n pods trained 10 steps and exited 0 in $((SECONDS - t0)) s; checkpoint ${latest[0]%/latest}/global_step10"
}

# scrape_metrics SLOT: GET /metrics of the pod in SLOT from outside it, as the PodMonitor's
# Prometheus does (the pod's address, no token: --status_bind=0.0.0.0 --status_metrics_open): 200,
# the job's state, and a step of rank 0.
scrape_metrics() {
  local url="http://$(k8s_addr "$1"):8080/metrics" body
  body="$(python3 -c 'import sys, urllib.request; r = urllib.request.urlopen(sys.argv[1], timeout=10); print(r.status); print(r.read().decode())' "$url")" ||
    fail "GET $url (the PodMonitor's scrape) failed"
  [[ "$(head -1 <<<"$body")" == 200 ]] || fail "GET $url: status $(head -1 <<<"$body")"
  grep -q '^dslaunch_job_state{state="running"} 1$' <<<"$body" || fail "GET $url: no running job state in: $(head -20 <<<"$body")"
  grep -q '^dslaunch_rank_step{rank="0",' <<<"$body" || fail "GET $url: no dslaunch_rank_step of rank 0"
  echo "scraped $url without a token: $(grep -c '^dslaunch_' <<<"$body") samples"
}

case_indexed_lost() {
  local manifest="$here/deploy/kubernetes/indexed-job.yaml"
  start_all "$manifest" "$(long_override 100000)"
  wait_for "$kStepLimit" "step 6 of the 2-pod job (a checkpoint at step 5)" at_step 6
  scrape_metrics 0
  echo "killing pod 1 (SIGKILL to its container) at step $(last_step)"
  podman kill -s KILL "${prefix}1" >/dev/null
  expect_exit "${prefix}0" 75
  podman logs "${prefix}0" 2>&1 | tail -3
  # The podFailurePolicy ignores 75 and counts the killed pod's 137 (within backoffLimitPerIndex):
  # the Job controller makes a new pod for each index (new addresses), which resume from the
  # newest checkpoint on the shared volume ("load": "auto") and finish the run.
  local saved
  saved="$(tr -d '[:space:]' <"$(echo "$work"/pvc/*/*/checkpoints/latest)")"
  echo "the host pod exited 75; newest checkpoint $saved; starting the replacement set"
  local hosts
  hosts="$(k8s_hosts "$manifest" 2 3)"
  k8s_start_pod "$manifest" 0 2 "$hosts" "${prefix}0r" "$work" "$(long_override 12)"
  k8s_start_pod "$manifest" 1 3 "$hosts" "${prefix}1r" "$work" "$work/long.json"
  expect_exit "${prefix}0r" 0
  expect_exit "${prefix}1r" 0
  logs_have "${prefix}0r" "resumed from .*/$saved" ||
    { show_logs 20; fail "the replacement set did not resume from $saved"; }
  [[ "$(last_step)" == 12 ]] || fail "the replacement set did not reach step 12 (last step $(last_step))"
  echo "the replacement set resumed from $saved and finished step 12 with exit 0 in both pods"
}

case_jobset_lost() {
  local manifest="$here/deploy/kubernetes/jobset.yaml"
  start_all "$manifest" "$(long_override 100000)"
  wait_for "$kStepLimit" "step 2 of the 2-pod job" at_step 2
  echo "killing pod 0, the host (SIGKILL to its container), at step $(last_step)"
  podman kill -s KILL "${prefix}0" >/dev/null
  expect_exit "${prefix}1" 75
  podman logs "${prefix}1" 2>&1 | tail -3
  echo "the other pod exited 75: its child Job fails (backoffLimit 0) and the JobSet recreates every pod"
}

# How many ranks the newest generation record in metrics.jsonl names.
newest_generation() {
  local m
  m="$(metrics_file)" || { echo "none"; return; }
  python3 -c '
import json, sys
gens = [json.loads(l) for l in open(sys.argv[1]) if "\"event\":\"generation\"" in l]
print("generation %s, world size %s" % (gens[-1].get("generation"), gens[-1].get("world_size")) if gens else "none")' "$m"
}

case_elastic() {
  local manifest="$here/deploy/kubernetes/indexed-job-elastic.yaml"
  start_all "$manifest" "$(long_override "$kElasticSteps")"
  wait_for "$kStepLimit" "step 6 of the 3-pod job (a checkpoint at step 5)" at_step 6
  echo "generation before the kill: $(newest_generation); killing pod 2 at step $(last_step)"
  podman kill -s KILL "${prefix}2" >/dev/null
  local before
  before="$(last_step)"
  shrunk() { logs_have "${prefix}0" 'continuing on'; }
  wait_for "$kStepLimit" "the job to restart on the remaining pods" shrunk
  [[ "$(podman inspect --format '{{.State.Running}}' "${prefix}0")" == true &&
    "$(podman inspect --format '{{.State.Running}}' "${prefix}1")" == true ]] || { show_logs; fail "pods 0 and 1 did not go on"; }
  wait_for "$kStepLimit" "a step after the shrink" at_step $((before + 1))
  echo "after the shrink: $(newest_generation), step $(last_step); starting a replacement pod 2 in a new namespace"
  # The Job controller's replacement: the same index (hostname, JOB_COMPLETION_INDEX), a new pod IP.
  local hosts
  hosts="$(k8s_hosts "$manifest" 0 1 3)"
  k8s_start_pod "$manifest" 2 3 "$hosts" "${prefix}2r" "$work" "$work/long.json"
  rejoined() { logs_have "${prefix}0" 'rejoined in the place of node'; }
  wait_for "$kRejoinLimit" "the replacement pod to rejoin" rejoined
  for c in 0 1 2r; do expect_exit "${prefix}$c" 0; done
  show_logs 12
  echo "generation at the end: $(newest_generation); last step $(last_step)"
  [[ "$(last_step)" == "$kElasticSteps" ]] || fail "the job did not reach step $kElasticSteps"
  # The replacement took part: the last generation ran on 3 ranks again.
  [[ "$(newest_generation)" =~ ^generation\ ([2-9]|[1-9][0-9]+),\ world\ size\ 3$ ]] ||
    fail "the last generation is '$(newest_generation)', not one of 3 ranks after the shrink"
}

case_kubeflow_lost() {
  local manifest="$here/deploy/kubernetes/pytorchjob.yaml"
  start_all "$manifest" "$(long_override 100000)"
  wait_for "$kStepLimit" "step 2 of the 2-pod job" at_step 2
  echo "killing the Worker pod (SIGKILL to its container) at step $(last_step)"
  podman kill -s KILL "${prefix}1" >/dev/null
  expect_exit "${prefix}0" 203
  logs_have "${prefix}0" "dslaunch: exit code 75 written as 203 (--exit_codes kubeflow)" ||
    { show_logs 10; fail "the Master did not say that 75 was written as 203"; }
  podman logs "${prefix}0" 2>&1 | tail -3
  echo "the Master exited 203: restartPolicy ExitCode retries it (75 would have failed the PyTorchJob)"
}

# The user's train.py (deploy/pytorch/) in a PyTorch image, as pytorchjob-gpu.yaml runs it. The
# PyTorch base is tests/kubernetes/pytorch-base.Dockerfile (Debian's python3-torch); the
# Dockerfile adds this tier's dslaunch image to it. No GPU here: --nproc_per_node=gpu becomes 1.
case_kubeflow_train_py() {
  local manifest="$here/deploy/kubernetes/pytorchjob-gpu.yaml"
  local tag="${image##*:}"
  local base="localhost/dslaunch-pytorch-base:$tag" user="localhost/dslaunch-user-script:$tag"
  local t0=$SECONDS
  podman build --network host -q -f "$here/tests/kubernetes/pytorch-base.Dockerfile" -t "$base" \
    "$here/tests/kubernetes" >/dev/null || fail "the PyTorch stand-in base did not build"
  podman build --network host -q -f "$here/deploy/pytorch/Dockerfile" --build-arg "PYTORCH_IMAGE=$base" \
    --build-arg "DSLAUNCH_IMAGE=$image" -t "$user" "$here/deploy/pytorch" >/dev/null ||
    fail "deploy/pytorch/Dockerfile did not build on $base"
  echo "images $base and $user ready in $((SECONDS - t0)) s"
  K8S_POD_IMAGE="$user" K8S_REPLACE_ARG="--nproc_per_node=gpu --nproc_per_node=1" start_all "$manifest" ""
  expect_exit "${prefix}0" 0
  expect_exit "${prefix}1" 0
  show_logs 4
  local last
  last="$(podman logs "${prefix}0" 2>&1 | grep -E '^(\[rank 0[^]]*\] )?step 1000 loss ' | tail -1)"
  [[ -n "$last" ]] || { show_logs 30; fail "the Master's log has no 'step 1000 loss' line of train.py's rank 0"; }
  # y = sum(x) is linear: DDP with SGD fits it; a loss above 0.01 after 1000 steps is no training.
  python3 -c 'import sys; v = float(sys.argv[1].split()[-1]); sys.exit(0 if v < 0.01 else 1)' "$last" ||
    fail "train.py did not train: '$last'"
  echo "train.py ran on 2 pods: $last"
}

case "$case_name" in
  indexed-train) train_all indexed-job.yaml ;;
  indexed-lost) case_indexed_lost ;;
  elastic) case_elastic ;;
  jobset) train_all jobset.yaml ;;
  jobset-lost) case_jobset_lost ;;
  pytorchjob) train_all pytorchjob-style.yaml ;;
  kubeflow) train_all pytorchjob.yaml ;;
  kubeflow-elastic) train_all pytorchjob-elastic.yaml ;;
  kubeflow-lost) case_kubeflow_lost ;;
  kubeflow-train-py) case_kubeflow_train_py ;;
  *) echo "usage: kubernetes_test.sh indexed-train|indexed-lost|elastic|jobset|jobset-lost|pytorchjob|kubeflow|kubeflow-elastic|kubeflow-lost|kubeflow-train-py" >&2; exit 2 ;;
esac
