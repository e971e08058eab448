#!/usr/bin/env bash
# Starts a real Slurm cluster on this machine (munged, slurmctld, three slurmds) for the
# `slurm` ctest label:
#
#   partition debug (the default): this host, one node, as before;
#   partition nodes: sweep-node1 and sweep-node2, the two test nodes of
#     tests/cluster/start-nodes.sh (a network and UTS namespace each, own hostname and
#     address on the bridge swbr0), each with its own slurmd started inside it. A job
#     there spans two "machines" that talk over TCP only, as real nodes do.
#
# slurmctld listens on the bridge's address 198.51.100.1 (127.0.0.1 inside a node is the
# node's own loopback). munge's socket is a file, shared by every namespace. Each slurmd
# has its own spool directory, pid file and log (%n below). Idempotent and quick when
# everything is up: only what is missing is started (a slurmd killed with its node comes
# back, and a node left DOWN is resumed), and the daemons restart only when the config
# written here changed. Needs root and the Debian packages slurmctld slurmd slurm-client
# munge (containers/install-deps.sh). Every node gets this machine's real CPU count and
# memory (from `slurmd -C`).
#
#   tests/slurm/start-cluster.sh        # then: sinfo, sbatch -p nodes -N 2 ...
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "start-cluster: needs root" >&2; exit 1; fi
for bin in slurmctld slurmd sinfo munged nsenter; do
  command -v "$bin" >/dev/null || { echo "start-cluster: $bin missing (run containers/install-deps.sh)" >&2; exit 1; }
done

here=$(cd "$(dirname "$0")" && pwd)
"$here/../cluster/start-nodes.sh" 2 >/dev/null

host=$(hostname -s)
ctl_addr=198.51.100.1  # the bridge swbr0 (start-nodes.sh): reachable from every node
test_nodes=(sweep-node1 sweep-node2)
all_nodes=("$host" "${test_nodes[@]}")
conf=/etc/slurm/slurm.conf

# The namespace holder of a test node (start-nodes.sh); empty for this host.
node_holder() { [[ "$1" == "$host" ]] || cat "/run/sweep-nodes/$1.pid" 2>/dev/null || true; }
node_state() { sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1; }
node_ready() { node_state "$1" | grep -Eq '^(idle|mixed|allocated|completing)$'; }
# True when node $1's slurmd runs, in that node's network namespace.
slurmd_up() {
  local pid holder
  pid=$(cat "/run/slurmd-$1.pid" 2>/dev/null || true)
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == slurmd ]] || return 1
  [[ "$1" == "$host" ]] && return 0
  holder=$(node_holder "$1")
  [[ -n "$holder" ]] && [[ "$(readlink "/proc/$pid/ns/net")" == "$(readlink "/proc/$holder/ns/net")" ]]
}
# Stops the daemon of pid file $1 (slurmctld.pid, slurmd*.pid), never another process
# that got its pid since.
stop_pidfile() {
  local pid daemon
  pid=$(cat "$1" 2>/dev/null || true)
  daemon=$(basename "$1" .pid)
  daemon=${daemon%%-*}
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$daemon" ]]; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$1"
}

mkdir -p /etc/slurm /var/spool/slurmctld /var/log/slurm /run/munge
for n in "${all_nodes[@]}"; do mkdir -p "/var/spool/slurmd/$n" "/tmp/slurm-tmpfs-$n"; done
# `slurmd -C` prints "CPUs=... RealMemory=..." measured on this machine (the nodes share it).
hw=$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ UpTime=[^ ]*//')
cat >"$conf.new" <<CONF
# Written by tests/slurm/start-cluster.sh: a test cluster of this host (partition debug)
# and the two test nodes of tests/cluster/start-nodes.sh (partition nodes).
ClusterName=sweep-test
SlurmctldHost=$host($ctl_addr)
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
# A node that was DOWN (not answering) is back as soon as its slurmd registers again.
ReturnToService=2
# Finished jobs stay visible to squeue --states=all for an hour: without slurmdbd (no
# sacct) that is how the sweep driver learns a task ended TIMEOUT, OUT_OF_MEMORY or
# NODE_FAIL.
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
# A node that stops answering is DOWN after 10 s (pinged every SlurmdTimeout/3), and its
# jobs end NODE_FAIL: short, so that the node-failure test ends in bounded time.
SlurmdTimeout=10
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
# Per node too: srun --mpi=pmix makes its client directory spmix_appdir_UID_JOB.STEP under
# TmpFS on every node of a step, and the test nodes share one /tmp ("File exists").
TmpFS=/tmp/slurm-tmpfs-%n
NodeName=$host NodeAddr=$ctl_addr $hw State=UNKNOWN
NodeName=sweep-node1 NodeAddr=198.51.100.11 $hw State=UNKNOWN
NodeName=sweep-node2 NodeAddr=198.51.100.12 $hw State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=nodes Nodes=sweep-node[1-2] Default=NO MaxTime=INFINITE State=UP
CONF
changed=1
if cmp -s "$conf.new" "$conf"; then changed=0; rm -f "$conf.new"; else mv "$conf.new" "$conf"; fi
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

# A changed config (or a cluster of the one-node layout before) restarts every daemon:
# a stale one would keep an old node description.
if [[ $changed == 1 ]]; then
  for f in /run/slurmd.pid /run/slurmd-*.pid /run/slurmctld.pid; do [[ -e "$f" ]] && stop_pidfile "$f"; done
fi
ctl_pid=$(cat /run/slurmctld.pid 2>/dev/null || true)
if [[ -z "$ctl_pid" ]] || ! kill -0 "$ctl_pid" 2>/dev/null; then
  slurmctld -c  # -c: forget saved jobs and node states of an earlier cluster
fi
for n in "${all_nodes[@]}"; do
  slurmd_up "$n" && continue
  stop_pidfile "/run/slurmd-$n.pid"
  if [[ "$n" == "$host" ]]; then
    slurmd -N "$n"
  else
    holder=$(node_holder "$n")
    [[ -n "$holder" ]] || { echo "start-cluster: test node $n is not up (tests/cluster/start-nodes.sh)" >&2; exit 1; }
    # Inside the node: its hostname, its address, its loopback.
    nsenter -t "$holder" -u -n -- slurmd -N "$n"
  fi
done

for _ in $(seq 120); do
  missing=()
  for n in "${all_nodes[@]}"; do node_ready "$n" || missing+=("$n"); done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "start-cluster: up: debug=$host nodes=${test_nodes[*]} ($(sinfo -h -N -n "$host" -o '%c CPUs, %m MB') each)"
    exit 0
  fi
  # A node left DOWN (an earlier start, a killed node) comes back on request.
  for n in "${missing[@]}"; do
    case $(node_state "$n") in
      down* | drain* | fail*) scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true ;;
    esac
  done
  sleep 0.5
done
echo "start-cluster: not ready: ${missing[*]}; last log lines:" >&2
for n in "${missing[@]}"; do tail -n 20 "/var/log/slurm/slurmd-$n.log" >&2 || true; done
tail -n 20 /var/log/slurm/slurmctld.log >&2
exit 1
