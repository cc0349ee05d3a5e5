#!/bin/bash
# A throwaway Slurm cluster on this one machine (Debian's slurm-wlm + munge, as root), so that the
# tests in tests/slurm/ run instead of skipping (CI starts it before `make test`). Not for
# production: root runs the jobs, no accounting, no cgroups (so no memory limits).
#
# Two compute nodes of different sizes, each its own slurmd on this host (Debian builds Slurm with
# multiple-slurmd support): `small` with 1 CPU and `big` with 2 CPUs (the CPU counts are declared,
# not measured: SlurmdParameters=config_overrides), in one partition `debug`. A job asking for
# --cpus-per-task=2 can only run on `big`, so the tests exercise heterogeneous nodes. task/affinity
# binds each job to the CPUs Slurm gave it: a 1-CPU job sees one CPU (sched_getaffinity, nproc), a
# 2-CPU job two, so the jobs also plan and run with different CPU affinities.
#
#   deploy/slurm/one-node-cluster.sh start   # install if needed, write slurm.conf, start what is not running
#   deploy/slurm/one-node-cluster.sh stop    # stop every daemon this script started (munged too)
#   deploy/slurm/one-node-cluster.sh status  # exit 0 when the cluster answers
# `start` is idempotent and quick when the cluster already runs (one `sinfo`).
#
# SLM4IE_SLURM_HOME=/abs/dir puts a second, separate cluster under that folder (its own slurm.conf,
# state, logs, pid files and munged socket; ports from SLM4IE_SLURM_PORTS="ctld small big"), so a
# test can start and stop one without touching the machine's (tests/slurm/test_cluster_script.py).
# Its commands need SLURM_CONF=$SLM4IE_SLURM_HOME/slurm.conf.
set -euo pipefail
HOME_DIR=${SLM4IE_SLURM_HOME:-}
read -r CTLD_PORT SMALL_PORT BIG_PORT <<<"${SLM4IE_SLURM_PORTS:-6817 6821 6822}"
NODES=(small:1:$SMALL_PORT big:2:$BIG_PORT)   # name:CPUs:slurmd port
if [[ -n $HOME_DIR ]]; then
  [[ $HOME_DIR == /* ]] || { echo "SLM4IE_SLURM_HOME must be an absolute path" >&2; exit 2; }
  RUN=$HOME_DIR/run CONF=$HOME_DIR/slurm.conf STATE=$HOME_DIR/state SPOOL=$HOME_DIR/spool LOGS=$HOME_DIR/log
  MUNGE_DIR=$HOME_DIR/munge MUNGE_VAR=$HOME_DIR/munge MUNGE_LOG=$HOME_DIR/munge/munged.log CLUSTER=slm4ie-$CTLD_PORT
else
  RUN=/run/slm4ie-slurm CONF=/etc/slurm/slurm.conf STATE=/var/spool/slm4ie-slurmctld SPOOL=/var/spool
  LOGS=/var/log/slurm MUNGE_DIR=/run/munge MUNGE_VAR=/var/lib/munge MUNGE_LOG=/var/log/munge/munged.log CLUSTER=slm4ie
fi
MUNGE_SOCKET=$MUNGE_DIR/munge.socket.2
export SLURM_CONF=$CONF

up() {  # every node idle or allocated, the partition up
  local out
  out=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
  [[ $(grep -cE ' (idle|mix|alloc)$' <<<"$out") -eq ${#NODES[@]} ]]
}

alive() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

write_conf() {
  local host nodes="" names=""
  host=$(hostname -s)
  for spec in "${NODES[@]}"; do
    IFS=: read -r name cpus port <<<"$spec"
    nodes+="NodeName=$name NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=$cpus State=UNKNOWN"$'\n'
    names+="${names:+,}$name"
  done
  mkdir -p "$(dirname "$CONF")"
  cat > "$CONF.new" <<CONF
# written by deploy/slurm/one-node-cluster.sh
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/slm4ie-slurmd-%n
SlurmdPidFile=$RUN/slurmd-%n.pidfile
SlurmctldPidFile=$RUN/slurmctld.pidfile
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=300
KillWait=5
SchedulerParameters=sched_min_interval=100000
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
${nodes}PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP
CONF
  mv "$CONF.new" "$CONF"
}

start_munge() {  # ours unless a munged already serves the socket (the machine's own: left alone)
  alive munged && return 0
  [[ -z $HOME_DIR ]] && pgrep -x munged >/dev/null && return 0
  mkdir -p "$MUNGE_DIR" "$MUNGE_VAR" "$(dirname "$MUNGE_LOG")"
  test -f /etc/munge/munge.key || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown -R munge:munge /etc/munge "$MUNGE_DIR" "$MUNGE_VAR" "$(dirname "$MUNGE_LOG")"
  chmod 400 /etc/munge/munge.key
  # in the foreground (-F) under setsid, like the Slurm daemons: $! is munged itself (a forking munged
  # left its exiting parent's pid here, so `stop` never ended it)
  setsid setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F --force \
    --socket="$MUNGE_SOCKET" --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_LOG" \
    --seed-file="$MUNGE_VAR/munged.seed" </dev/null >/dev/null 2>&1 &
  echo $! > "$RUN/munged.pid"
  for _ in $(seq 40); do [[ -S $MUNGE_SOCKET ]] && return 0; sleep 0.25; done
  echo "munged did not start; see $MUNGE_LOG" >&2; exit 1
}

stop_pid() {  # TERM, then up to 5 s for it to go, then KILL
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
start)
  # only ask a controller of ours: without one, sinfo retries for about a minute before it gives up
  if alive slurmctld && up; then sinfo -N -o '%N %c %t %P'; exit 0; fi
  command -v slurmctld >/dev/null && command -v munged >/dev/null || \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge
  mkdir -p "$RUN" "$STATE" "$LOGS"
  write_conf
  start_munge
  if ! alive slurmctld; then
    setsid /usr/sbin/slurmctld -D -i >"$LOGS/slurmctld.out" 2>&1 < /dev/null & echo $! > "$RUN/slurmctld.pid"
  fi
  for spec in "${NODES[@]}"; do
    name=${spec%%:*}
    mkdir -p "$SPOOL/slm4ie-slurmd-$name"
    alive "slurmd-$name" && continue
    setsid /usr/sbin/slurmd -D -N "$name" >"$LOGS/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmd-$name.pid"
  done
  for _ in $(seq 60); do
    if up; then sinfo -N -o '%N %c %t %P'; exit 0; fi
    # a node that registered before the controller knew it stays down: resume it
    scontrol update nodename=ALL state=resume >/dev/null 2>&1 || true
    sleep 0.5
  done
  echo "slurm did not come up; see $LOGS/" >&2; sinfo -N >&2 || true; exit 1 ;;
stop)
  for pidfile in "$RUN"/slurmd-*.pid "$RUN/slurmctld.pid"; do
    [[ -f $pidfile ]] || continue
    stop_pid "$(cat "$pidfile")"
    rm -f "$pidfile"
  done
  if [[ -f $RUN/munged.pid ]]; then  # we started it; an older start recorded a pid munged had left
    stop_pid "$(cat "$RUN/munged.pid")"
    [[ -f $MUNGE_DIR/munged.pid ]] && stop_pid "$(cat "$MUNGE_DIR/munged.pid")"
    rm -f "$RUN/munged.pid"
  fi ;;
status)
  alive slurmctld && up && sinfo -N -o '%N %c %t %P' ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
