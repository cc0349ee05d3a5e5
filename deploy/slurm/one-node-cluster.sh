#!/bin/bash
# A throwaway one-node Slurm cluster on this machine (Debian's slurm-wlm + munge, as root), so that
# tests/dagster_layer/test_slm4ie_cli.py::test_the_readme_slurm_array_job_publishes_the_serial_bytes
# runs instead of skipping. Not for production: root runs the jobs, no accounting.
#   deploy/slurm/one-node-cluster.sh start     # apt-get install if needed, write slurm.conf, start daemons
#   deploy/slurm/one-node-cluster.sh stop      # stop the daemons this script started
set -euo pipefail
RUN=/run/slm4ie-slurm
case "${1:-}" in
start)
  command -v slurmctld >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge
  host=$(hostname -s); cpus=$(nproc)
  mkdir -p /etc/slurm /var/spool/slm4ie-slurmctld /var/spool/slm4ie-slurmd /var/log/slurm /run/munge "$RUN"
  test -f /etc/munge/munge.key || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 400 /etc/munge/munge.key
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=slm4ie
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slm4ie-slurmctld
SlurmdSpoolDir=/var/spool/slm4ie-slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged --force
  setsid /usr/sbin/slurmctld -D >/var/log/slurm/slurmctld.out 2>&1 & echo $! > "$RUN/slurmctld.pid"
  setsid /usr/sbin/slurmd -D >/var/log/slurm/slurmd.out 2>&1 & echo $! > "$RUN/slurmd.pid"
  for _ in $(seq 30); do sinfo -h -o %a 2>/dev/null | grep -q up && { sinfo; exit 0; }; sleep 1; done
  echo "slurm did not come up; see /var/log/slurm/" >&2; exit 1 ;;
stop)
  for d in slurmd slurmctld; do
    if [ -f "$RUN/$d.pid" ]; then kill "$(cat "$RUN/$d.pid")" 2>/dev/null || true; rm -f "$RUN/$d.pid"; fi
  done ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
