#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, all of it in one scratch directory: for the
# cluster test (tests/test_slurm.c) and for trying scripts/slurm/ before a real cluster.
#
#   scripts/slurm/local-cluster.sh start DIR   # prints "export SLURM_CONF=DIR/slurm.conf"
#   scripts/slurm/local-cluster.sh stop DIR    # stops the daemons it started, by their pids
#
# start writes DIR/slurm.conf (one node named by `hostname -s` with this machine's CPUs,
# proctrack/linuxproc, task/none, select/cons_tres, SlurmUser=root, free ports), a munge key,
# and the state, spool and log directories under DIR; then starts munged, slurmctld and
# slurmd, records their pids in DIR/pids and waits for the node to be idle.
# Needs root and the packages of scripts/deps.sh (slurm-wlm, munge).
# Every wait is bounded in seconds, not tries: each scontrol/sinfo call gets at most 5 s
# (where the hostname does not resolve, one call can take 10 s), and the whole wait for the
# controller, then for the node, at most LOCAL_CLUSTER_WAIT_S (default 60).
# Exit status: 0 up (or stopped); 77 the cluster cannot run here, and the message names what
# is missing (slurm-wlm or munge not installed, the hostname does not resolve, the controller
# does not answer, /sys/fs/cgroup is not mounted, slurmd cannot start; logs follow); 1 anything
# else (munged failing, the node not idle).
set -uo pipefail
cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# a zombie (exited, not yet reaped by its parent) is gone
alive() { [ -e "/proc/$1" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]; }

stop() {
  local d=$1
  [ -f "$d/pids" ] || return 0
  # jobs first, so that no shard outlives the cluster
  if [ -f "$d/slurm.conf" ] && command -v scancel >/dev/null; then
    SLURM_CONF="$d/slurm.conf" timeout 10 scancel --user="$(id -un)" 2>/dev/null || true
  fi
  local name pid
  # reverse start order: slurmd, slurmctld, munged
  tac "$d/pids" | while read -r name pid; do
    [ -n "$pid" ] && alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.2; done
    if alive "$pid"; then
      echo "local-cluster.sh: $name ($pid) did not stop in 10 s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  rm -f "$d/pids"
}

if [ "$cmd" = stop ]; then
  stop "$dir"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

for b in munged slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$b" >/dev/null || { echo "local-cluster.sh: $b not found: install slurm-wlm and munge (scripts/deps.sh test); the cluster test skips" >&2; exit 77; }
done
wait_s=${LOCAL_CLUSTER_WAIT_S:-60}
case $wait_s in ''|*[!0-9]*) echo "local-cluster.sh: LOCAL_CLUSTER_WAIT_S = \"$wait_s\": expected whole seconds" >&2; exit 2 ;; esac
cgroup=${LOCAL_CLUSTER_CGROUP:-/sys/fs/cgroup}
host=$(hostname -s)
# slurmctld and slurmd look their host up by name: without an answer every call waits for DNS
if ! timeout 5 getent hosts "$host" >/dev/null 2>&1; then
  echo "local-cluster.sh: the hostname \"$host\" does not resolve (no /etc/hosts entry?): Slurm needs it; the cluster test skips" >&2
  exit 77
fi
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd)
[ -f "$dir/pids" ] && { echo "local-cluster.sh: $dir/pids exists: a cluster runs there (stop it first)" >&2; exit 1; }
sock="$dir/munge/munge.sock"
[ ${#sock} -lt 100 ] || { echo "local-cluster.sh: $sock: path too long for a unix socket (< 100 bytes)" >&2; exit 1; }
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" || exit 1
chmod 755 "$dir" "$dir/munge"
if [ ! -f "$dir/munge/munge.key" ]; then
  head -c 1024 /dev/urandom > "$dir/munge/munge.key" && chmod 400 "$dir/munge/munge.key" || exit 1
fi

# two free TCP ports: none listening in /proc/net/tcp{,6}
listening() {
  local _sl local _rem st _rest
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _sl local _rem st _rest; do
    [ "$st" = 0A ] && echo $((16#${local##*:}))
  done
}
used=" $(listening | tr '\n' ' ') "
port=$((20000 + ($$ % 20000) * 2))
while [[ $used == *" $port "* || $used == *" $((port + 1)) "* ]]; do port=$((port + 2)); done

cat > "$dir/slurm.conf" <<CONF
# a one-node cluster for bench's tests (scripts/slurm/local-cluster.sh)
ClusterName=benchlocal
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"

# start NAME PIDFILE COMMAND...: the daemon forks; its pid file names it
start() {
  local name=$1 pidfile=$2
  shift 2
  rm -f "$pidfile"
  "$@" || return 1
  for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
  [ -s "$pidfile" ] || return 1
  echo "$name $(cat "$pidfile")" >> "$dir/pids"
}
fail() {
  local rc=$1 what=$2 log=$3
  echo "local-cluster.sh: $what" >&2
  [ -f "$log" ] && tail -n 15 "$log" | sed 's/^/  | /' >&2
  stop "$dir"
  exit "$rc"
}
: > "$dir/pids"
start munged "$dir/munge/munged.pid" munged -f --key-file="$dir/munge/munge.key" --socket="$sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
  || fail 1 "munged did not start" "$dir/log/munged.log"
start slurmctld "$dir/slurmctld.pid" slurmctld -f "$SLURM_CONF" \
  || fail 77 "slurmctld cannot start on this machine: the cluster test skips" "$dir/log/slurmctld.log"
up=0
deadline=$((SECONDS + wait_s))
while [ $SECONDS -lt $deadline ]; do
  if timeout 5 scontrol ping 2>/dev/null | grep -q "is UP"; then up=1; break; fi
  sleep 0.2
done
[ $up = 1 ] || fail 77 "slurmctld started but does not answer scontrol ping within $wait_s s: the cluster test skips" "$dir/log/slurmctld.log"
# slurmd reads its cgroup hierarchy at start, whatever the plugins
grep -qs " $cgroup " /proc/mounts \
  || fail 77 "$cgroup is not mounted: slurmd cannot start without it; the cluster test skips" /dev/null
start slurmd "$dir/slurmd.pid" slurmd -f "$SLURM_CONF" \
  || fail 77 "slurmd cannot start on this machine: the cluster test skips" "$dir/log/slurmd.log"
idle=0
deadline=$((SECONDS + wait_s))
while [ $SECONDS -lt $deadline ]; do
  state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null)
  case $state in idle*|mixed*|allocated*) idle=1; break ;; esac
  sleep 0.2
done
[ $idle = 1 ] || fail 1 "node $host is \"${state:-unknown}\", not idle, $wait_s s after slurmd started" "$dir/log/slurmd.log"
echo "local-cluster.sh: up: $(tr '\n' ' ' < "$dir/pids")on ports $port, $((port + 1)) in $dir" >&2
echo "export SLURM_CONF=$SLURM_CONF"
