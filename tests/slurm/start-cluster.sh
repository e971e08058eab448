#!/usr/bin/env bash
# Starts a real one-node Slurm cluster on this machine (munged, slurmctld, slurmd) for
# the `slurm` ctest label. Idempotent: when the node already answers idle, it does
# nothing. Needs root and the Debian packages slurmctld slurmd slurm-client munge
# (containers/install-deps.sh). The node gets this machine's real CPU count and memory
# (from `slurmd -C`), so jobs are scheduled as they would be on a real node.
#
#   tests/slurm/start-cluster.sh        # then: sinfo, sbatch, srun ...
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "start-cluster: needs root" >&2; exit 1; fi
for bin in slurmctld slurmd sinfo munged; do
  command -v "$bin" >/dev/null || { echo "start-cluster: $bin missing (run containers/install-deps.sh)" >&2; exit 1; }
done

node=$(hostname -s)
node_idle() { sinfo -h -N -n "$node" -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; }
if pgrep -x slurmctld >/dev/null && pgrep -x slurmd >/dev/null && node_idle; then
  echo "start-cluster: node $node already up"
  exit 0
fi

conf=/etc/slurm/slurm.conf
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
# `slurmd -C` prints "NodeName=... CPUs=... RealMemory=..." measured on this machine.
hw=$(slurmd -C | head -n1)
cat >"$conf.new" <<CONF
# Written by tests/slurm/start-cluster.sh: a one-node test cluster.
ClusterName=sweep-test
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
# No cgroup plugins: they need a writable cgroup tree that containers rarely give.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to squeue --states=all for an hour: without slurmdbd (no
# sacct) that is how the sweep driver learns a task ended TIMEOUT or OUT_OF_MEMORY.
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$hw NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
# Drop the "UpTime=" token slurmd -C may append on the same line.
sed -i 's/ UpTime=[^ ]*//' "$conf.new"
mv "$conf.new" "$conf"
# slurmd loads a cgroup plugin whatever ProctrackType says; 22.05 has no "disabled", so
# let it autodetect (it only reads the hierarchy).
echo "# written by tests/slurm/start-cluster.sh: defaults" >/etc/slurm/cgroup.conf

# munge: a key, then the daemon as its own user.
if [[ ! -s /etc/munge/munge.key ]]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
if ! pgrep -u munge -x munged >/dev/null; then
  # --force: start even over the stale socket of a munged that was killed.
  runuser -u munge -- /usr/sbin/munged --force
fi

# Restart the Slurm daemons with this config (a stale one from an earlier run would
# keep an old node description).
for d in slurmctld slurmd; do
  pid=$(cat "/run/$d.pid" 2>/dev/null || true)
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
done
slurmctld -c     # -c: forget saved jobs and node states of an earlier cluster
slurmd -N "$node"

for _ in $(seq 120); do
  if node_idle; then echo "start-cluster: node $node up ($(sinfo -h -N -n "$node" -o '%c CPUs, %m MB'))"; exit 0; fi
  # A node left DOWN by an earlier start comes back on request.
  scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  sleep 0.5
done
echo "start-cluster: node $node did not become idle; last log lines:" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
