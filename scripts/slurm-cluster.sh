#!/usr/bin/env bash
# A real Slurm cluster for tests and benchmarks, on top of the namespaced test cluster
# (scripts/netns-cluster.sh): munged, slurmctld in the root namespace, one slurmd per node namespace.
#
#   scripts/slurm-cluster.sh up [CPUS]   start munge + slurmctld + one slurmd per node of the netns
#                                        cluster that is up (CPUS per node, default 2); waits until
#                                        every node is idle
#   scripts/slurm-cluster.sh down        stop every daemon this script started, remove its state
#   scripts/slurm-cluster.sh status      sinfo; exit 0 when every node is idle
#   scripts/slurm-cluster.sh env         print `export SLURM_CONF=...` for a shell
#
# Layout (docs/slurm.md, "Test cluster"):
#   state:  ${DSLAUNCH_SLURM_DIR:-/tmp/dslaunch-slurm}/
#           slurm.conf        SLURM_CONF for srun/salloc/sbatch (nothing under /etc/slurm is used)
#           munge/            key, socket, pid, log of this cluster's munged (user munge)
#           ctld/             slurmctld's state, pid and log
#           nodes/NAME/       each slurmd's spool, pid and log (%n in slurm.conf)
#   nodes:  named by their addresses (NodeName=172.30.77.10), so SLURM_JOB_NODELIST
#           (172.30.77.[10-11]) resolves without DNS or /etc/hosts; slurmctld listens on the
#           bridge address, 172.30.77.1, where every node reaches it.
#
# Every daemon is started with its own pid file and stopped through it, never by name. Needs root
# and the packages slurmctld slurmd slurm-client munge (scripts/setup.sh).
set -euo pipefail

readonly STATE="${DSLAUNCH_SLURM_DIR:-/tmp/dslaunch-slurm}"
readonly CLUSTER="${DSLAUNCH_CLUSTER_DIR:-/tmp/dslaunch-cluster}"
readonly NS_PREFIX=dsln
readonly SUBNET=172.30.77
readonly CTLD_ADDR="${SUBNET}.1"
readonly FIRST_HOST=10
# Ports of this cluster's daemons: Slurm's defaults plus 100, so that a system Slurm on the
# default ports (6817/6818) is never reached by mistake.
readonly CTLD_PORT=6917
readonly SLURMD_PORT=6918
# How long `up` waits for every node to become idle (registration takes about a second here).
readonly READY_TIMEOUT_S=30
# How long `down` waits for a daemon to exit after SIGTERM before SIGKILL.
readonly STOP_TIMEOUT_S=10

die() { echo "slurm-cluster: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }

need() {
  [[ $EUID -eq 0 ]] || die "needs root (it runs slurmd in network namespaces); run it with sudo"
  local b
  for b in munged slurmctld slurmd sinfo srun; do
    command -v "$b" >/dev/null || die "'$b' not found: install slurmctld slurmd slurm-client munge (scripts/setup.sh)"
  done
  id munge >/dev/null 2>&1 || die "no user 'munge': install munge (scripts/setup.sh)"
}

node_addr() { echo "${SUBNET}.$((FIRST_HOST + $1))"; }

alive() {
  local st
  st=$(sed 's/^.*) //' /proc/"$1"/stat 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n "$st" && "$st" != Z && "$st" != X ]]
}

# Stops the process whose pid file is $1 if its command line still names $2 (a recycled pid that
# now belongs to something else is left alone).
stop_pidfile() {
  local pidfile=$1 marker=$2 pid
  [[ -f "$pidfile" ]] || return 0
  pid=$(<"$pidfile")
  pid=${pid//[^0-9]/}
  if [[ -n "$pid" && -r /proc/$pid/cmdline ]] && tr '\0' ' ' </proc/"$pid"/cmdline | grep -qF -- "$marker"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((STOP_TIMEOUT_S * 20))); do
      alive "$pid" || break
      sleep 0.05
    done
    if alive "$pid"; then
      log "pid $pid ($marker) did not exit within ${STOP_TIMEOUT_S}s of SIGTERM; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

# Processes of this cluster's jobs (SLURM_CONF names its state directory and SLURM_JOB_ID is set)
# still running: steps and their children left behind (there should be none).
leftovers() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    local env
    env=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null) || continue
    # A job's processes carry SLURM_JOB_ID; a shell that merely exported SLURM_CONF does not.
    if grep -qxF "SLURM_CONF=$STATE/slurm.conf" <<<"$env" && grep -q "^SLURM_JOB_ID=" <<<"$env"; then
      echo "$p"
    fi
  done
}

cmd_down() {
  need
  local d
  for d in "$STATE"/nodes/*; do
    [[ -d "$d" ]] || continue
    stop_pidfile "$d/slurmd.pid" "$STATE/slurm.conf"
  done
  stop_pidfile "$STATE/ctld/slurmctld.pid" "$STATE/slurm.conf"
  stop_pidfile "$STATE/munge/munged.pid" "$STATE/munge"
  local left
  left=$(leftovers | tr '\n' ' ')
  [[ -z "$left" ]] || log "warning: processes of this cluster's jobs still run: $left"
  rm -rf -- "$STATE"
}

write_conf() {
  local n=$1 cpus=$2 names
  names="$(node_addr 0)"
  ((n == 1)) || names="${SUBNET}.[$FIRST_HOST-$((FIRST_HOST + n - 1))]"
  cat >"$STATE/slurm.conf" <<EOF
# Test cluster of scripts/slurm-cluster.sh: $n node(s), one slurmd per network namespace.
ClusterName=dslaunch
SlurmctldHost=$(hostname -s)($CTLD_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$STATE/ctld/state
SlurmctldPidFile=$STATE/ctld/slurmctld.pid
SlurmctldLogFile=$STATE/ctld/slurmctld.log
SlurmdSpoolDir=$STATE/nodes/%n
SlurmdPidFile=$STATE/nodes/%n/slurmd.pid
SlurmdLogFile=$STATE/nodes/%n/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# A job's steps get SIGTERM, then SIGKILL after KillWait: the window for a save-on-stop checkpoint.
KillWait=30
# Requeue on the exit code of the requeue class (common/exit_codes.h) is the batch script's
# choice (deploy/slurm/); here a requeued job may start again at once.
JobRequeue=1
MinJobAge=300
# A salloc or srun that stops answering (killed by a failed test) ends its allocation after this long.
InactiveLimit=30
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$names CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

start_munge() {
  local d="$STATE/munge"
  mkdir -p "$d"
  dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
  chown -R munge:munge "$d"
  chmod 0711 "$d"  # munged: every client must be able to reach the socket
  chmod 0400 "$d/munge.key"
  runuser -u munge -- munged --socket="$d/munge.socket" --key-file="$d/munge.key" \
    --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munged.seed"
  for _ in $(seq 100); do
    [[ -S "$d/munge.socket" ]] && return 0
    sleep 0.05
  done
  die "munged did not create its socket; see $d/munged.log"
}

cmd_up() {
  local cpus=${1:-2} n i addr
  [[ "$cpus" =~ ^[0-9]+$ ]] && ((cpus >= 1)) || die "up: CPUS must be a positive integer, got '$cpus'"
  need
  [[ -f "$CLUSTER/nodes" ]] || die "the namespaced test cluster is not up ($CLUSTER/nodes missing): run scripts/netns-cluster.sh up N first"
  n=$(<"$CLUSTER/nodes")
  cmd_down
  mkdir -p "$STATE/ctld/state" "$STATE/nodes"
  chmod 0755 "$STATE"
  write_conf "$n" "$cpus"
  export SLURM_CONF="$STATE/slurm.conf"
  start_munge
  slurmctld -f "$SLURM_CONF"
  for ((i = 0; i < n; i++)); do
    addr=$(node_addr "$i")
    mkdir -p "$STATE/nodes/$addr"
    # nsenter, not `ip netns exec`: that one mounts a fresh /sys without the cgroup hierarchy,
    # which slurmd needs at start (it refuses: "No filesystem mounted on /sys/fs/cgroup").
    nsenter --net="/run/netns/${NS_PREFIX}$i" slurmd -f "$SLURM_CONF" -N "$addr"
  done
  local deadline=$((SECONDS + READY_TIMEOUT_S)) idle
  while ((SECONDS <= deadline)); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    if ((idle == n)); then
      log "up: $n node(s) $(node_addr 0)..$(node_addr $((n - 1))), $cpus CPUs each; export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  sinfo -N >&2 || true
  die "not every node became idle within ${READY_TIMEOUT_S}s; see $STATE/ctld/slurmctld.log and $STATE/nodes/*/slurmd.log"
}

cmd_status() {
  need
  [[ -f "$STATE/slurm.conf" ]] || { echo "slurm-cluster: down (no $STATE/slurm.conf)"; return 1; }
  SLURM_CONF="$STATE/slurm.conf" sinfo -N
  local n idle
  n=$(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -o '%N' | sort -u | wc -l)
  idle=$(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -t idle -o '%N' | sort -u | wc -l)
  ((n > 0 && n == idle))
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$STATE/slurm.conf" ;;
  *) echo "usage: $0 up [CPUS] | down | status | env" >&2; exit 2 ;;
esac
