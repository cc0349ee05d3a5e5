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
set -euo pipefail
RUN=/run/slm4ie-slurm
NODES=(small:1:6821 big:2:6822)   # name:CPUs:slurmd port
CONF=/etc/slurm/slurm.conf

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
  mkdir -p /etc/slurm
  cat > "$CONF.new" <<CONF
# written by deploy/slurm/one-node-cluster.sh
ClusterName=slm4ie
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slm4ie-slurmctld
SlurmdSpoolDir=/var/spool/slm4ie-slurmd-%n
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
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
${nodes}PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP
CONF
  mv "$CONF.new" "$CONF"
}

start_munge() {
  pgrep -x munged >/dev/null && return 0
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  test -f /etc/munge/munge.key || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --force
  pgrep -x -o munged > "$RUN/munged.pid"   # ours to stop
}

case "${1:-}" in
start)
  if up; then sinfo -N -o '%N %c %t %P'; exit 0; fi
  command -v slurmctld >/dev/null && command -v munged >/dev/null || \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge
  mkdir -p "$RUN" /var/spool/slm4ie-slurmctld /var/log/slurm
  write_conf
  start_munge
  if ! alive slurmctld; then
    setsid /usr/sbin/slurmctld -D -i >/var/log/slurm/slurmctld.out 2>&1 < /dev/null & echo $! > "$RUN/slurmctld.pid"
  fi
  for spec in "${NODES[@]}"; do
    name=${spec%%:*}
    mkdir -p "/var/spool/slm4ie-slurmd-$name"
    alive "slurmd-$name" && continue
    setsid /usr/sbin/slurmd -D -N "$name" >"/var/log/slurm/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmd-$name.pid"
  done
  for _ in $(seq 60); do
    if up; then sinfo -N -o '%N %c %t %P'; exit 0; fi
    # a node that registered before the controller knew it stays down: resume it
    scontrol update nodename=ALL state=resume >/dev/null 2>&1 || true
    sleep 0.5
  done
  echo "slurm did not come up; see /var/log/slurm/" >&2; sinfo -N >&2 || true; exit 1 ;;
stop)
  for pidfile in "$RUN"/slurmd-*.pid "$RUN/slurmctld.pid" "$RUN/munged.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    rm -f "$pidfile"
  done ;;
status)
  up && sinfo -N -o '%N %c %t %P' ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
