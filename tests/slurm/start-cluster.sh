#!/usr/bin/env bash
# Starts a private Slurm cluster on this machine (its own munged, slurmctld, three slurmds)
# for the `slurm` ctest label:
#
#   partition debug (the default): this host, one node;
#   partition nodes: sweep-node1 and sweep-node2, the two test nodes of
#     tests/cluster/start-nodes.sh (a network and UTS namespace each, own hostname and
#     address on the bridge swbr0), each with its own slurmd started inside it. A job
#     there spans two "machines" that talk over TCP only, as real nodes do.
#
# Private: everything it has lies under /var/lib/sweep-slurm (but TmpFS, below), and it neither reads nor
# writes /etc/slurm or /etc/munge, so it runs beside a Slurm and a munge the machine
# already has (even on the same host name) without touching them:
#
#   slurm.conf, cgroup.conf   the config; clients find it through SLURM_CONF
#   state/                    StateSaveLocation (slurmctld)
#   spool/NODE/               SlurmdSpoolDir of each node
#   (/tmp/sweep-slurm/NODE/   TmpFS of each node: under /tmp, which containers (ch-run)
#                             bind, since srun --mpi=pmix puts the ranks' PMIx directory
#                             there and a rank in an image must reach it)
#   run/                      slurmctld.pid, slurmd-NODE.pid
#   log/                      slurmctld.log, slurmd-NODE.log
#   munge/                    its own munged: munge.key, munged.sock (AuthInfo=socket=...),
#                             munged.pid, munged.seed, munged.log (owned by user munge)
#
# Ports: slurmctld 16817, slurmd 16818 (not Slurm's 6817/6818); the script stops with a
# message naming the holder when another process has one. It stops and restarts only
# daemons it started: a pid from its pid files counts only while /proc/PID/cmdline names
# this config (munged: this socket).
#
# slurmctld listens on the bridge's address 198.51.100.1 (127.0.0.1 inside a node is the
# node's own loopback). The munge socket is a file, shared by every namespace. Idempotent
# and quick when everything is up: only what is missing is started (a slurmd killed with
# its node comes back, and a node left DOWN is resumed), and the Slurm daemons restart
# only when the config written here changed. Needs root and the Debian packages slurmctld
# slurmd slurm-client munge (containers/install-deps.sh). Every node gets this machine's
# real CPU count and memory (from `slurmd -C`).
#
#   tests/slurm/start-cluster.sh          # start it, or check that it is up
#   tests/slurm/start-cluster.sh --stop   # stop its daemons (state and logs stay)
#
# By hand (ctest sets SLURM_CONF for the `slurm` tests itself, tests/CMakeLists.txt):
#
#   export SLURM_CONF=/var/lib/sweep-slurm/slurm.conf
#   sinfo; sbatch -p nodes -N 2 ...; squeue; scancel ...
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "start-cluster: needs root" >&2; exit 1; fi
for bin in slurmctld slurmd sinfo scontrol munged nsenter ss; do
  command -v "$bin" >/dev/null || { echo "start-cluster: $bin missing (run containers/install-deps.sh)" >&2; exit 1; }
done

top=/var/lib/sweep-slurm
conf=$top/slurm.conf
ctld_port=16817
slurmd_port=16818
munge_dir=$top/munge
munge_socket=$munge_dir/munged.sock
# Every Slurm command below, and whatever it starts, reads this config, never /etc/slurm.
export SLURM_CONF=$conf

host=$(hostname -s)
ctl_addr=198.51.100.1  # the bridge swbr0 (start-nodes.sh): reachable from every node
test_nodes=(sweep-node1 sweep-node2)
all_nodes=("$host" "${test_nodes[@]}")

# True when pid $1 runs program $2 (its comm) with $3 among its arguments: a daemon of
# this cluster, not another one, nor a process that got the pid later.
is_ours() {
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && [[ "$(cat "/proc/$1/comm" 2>/dev/null)" == "$2" ]] &&
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$3"
}
# The pid in pid file $1 when it is a daemon $2 of ours (its argument $3); else nothing.
our_pid() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  if is_ours "$pid" "$2" "$3"; then echo "$pid"; fi
}
# Sends SIGTERM to the daemon $2 of pid file $1 when it is ours (argument $3), then drops
# the file. Adds the pid to `stopping`, for wait_stopped.
stopping=()
term_ours() {
  local pid
  pid=$(our_pid "$1" "$2" "$3")
  if [[ -n "$pid" ]]; then kill "$pid" && stopping+=("$pid"); fi
  rm -f "$1"
}
# Waits up to 5 s for the daemons of `stopping` to exit (a daemon takes seconds; they
# end side by side).
wait_stopped() {
  local pid
  for _ in $(seq 50); do
    for pid in "${stopping[@]}"; do kill -0 "$pid" 2>/dev/null && { sleep 0.1; continue 2; }; done
    break
  done
  stopping=()
}
stop_ours() { term_ours "$@"; wait_stopped; }
stop_slurm() {
  local f
  for f in "$top"/run/slurmd-*.pid; do [[ -e "$f" ]] && term_ours "$f" slurmd "$conf"; done
  term_ours "$top/run/slurmctld.pid" slurmctld "$conf"
  wait_stopped
}

if [[ "${1:-}" == "--stop" ]]; then
  stop_slurm
  stop_ours "$munge_dir/munged.pid" munged "--socket=$munge_socket"
  echo "start-cluster: stopped (state and logs stay in $top)"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: start-cluster.sh [--stop]" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
"$here/../cluster/start-nodes.sh" 2 >/dev/null

# The namespace holder of a test node (start-nodes.sh); empty for this host.
node_holder() { [[ "$1" == "$host" ]] || cat "/run/sweep-nodes/$1.pid" 2>/dev/null || true; }
node_state() { sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1; }
node_ready() { node_state "$1" | grep -Eq '^(idle|mixed|allocated|completing)$'; }
# True when node $1's slurmd of this cluster runs, in that node's network namespace.
slurmd_up() {
  local pid holder
  pid=$(our_pid "$top/run/slurmd-$1.pid" slurmd "$conf")
  [[ -n "$pid" ]] || return 1
  [[ "$1" == "$host" ]] && return 0
  holder=$(node_holder "$1")
  [[ -n "$holder" ]] && [[ "$(readlink "/proc/$pid/ns/net")" == "$(readlink "/proc/$holder/ns/net")" ]]
}
# Fails, naming the holder, when TCP port $1 ($2 names it) is taken in the network
# namespace of process $3 (empty: this host's). Called only before a daemon of ours
# starts there, so the holder is never one of ours.
require_free_port() {
  local in=() taken
  [[ -z "$3" ]] || in=(nsenter -t "$3" -n --)
  taken=$("${in[@]}" ss -Hltnp "sport = :$1" 2>/dev/null || true)
  if [[ -n "$taken" ]]; then
    echo "start-cluster: port $1 ($2) is already in use${3:+ in that node}, so this cluster cannot start:" >&2
    echo "$taken" >&2
    echo "start-cluster: stop that process, or change the port in $0" >&2
    exit 1
  fi
}

mkdir -p "$top" "$top/state" "$top/run" "$top/log" "$munge_dir"
chmod 0755 "$top"
for n in "${all_nodes[@]}"; do mkdir -p "$top/spool/$n" "/tmp/sweep-slurm/$n"; done
# `slurmd -C` prints "CPUs=... RealMemory=..." measured on this machine (the nodes share it).
hw=$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ UpTime=[^ ]*//')
cat >"$conf.new" <<CONF
# Written by tests/slurm/start-cluster.sh: a private test cluster of this host (partition
# debug; short, the same host with a one-minute limit) and the two test nodes of
# tests/cluster/start-nodes.sh (partition nodes). Its
# clients find it through SLURM_CONF=$conf.
ClusterName=sweep-test
SlurmctldHost=$host($ctl_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
# Its own munged (the script starts it), not the machine's.
AuthInfo=socket=$munge_socket
# No cgroup plugins: they need a writable cgroup tree that containers rarely give.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# A finished array task's CPU goes to the next pending task at once, not at the next
# batch scheduling pass (batch_sched_delay, 3 s by default): the 500-run sweep test runs
# tasks of a few milliseconds, and many sites tune high-throughput partitions the same way.
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
# A node that was DOWN (not answering) is back as soon as its slurmd registers again.
ReturnToService=2
# Finished jobs stay visible to squeue --states=all for an hour: without slurmdbd (no
# sacct) that is how the sweep driver learns a task ended TIMEOUT, OUT_OF_MEMORY or
# NODE_FAIL.
MinJobAge=3600
# Small, so that a test sweep of 500 runs (tests/programs/linreg, milliseconds each) goes
# in 25 arrays of at most MaxArraySize tasks; a job over its partition's limits waits (PartitionTimeLimit) rather
# than being refused at submission, as on many sites: the driver must see that it can
# never start.
MaxArraySize=20
EnforcePartLimits=NO
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
# A node that stops answering is DOWN after 10 s (pinged every SlurmdTimeout/3), and its
# jobs end NODE_FAIL: short, so that the node-failure test ends in bounded time.
SlurmdTimeout=10
StateSaveLocation=$top/state
SlurmdSpoolDir=$top/spool/%n
SlurmctldPidFile=$top/run/slurmctld.pid
SlurmdPidFile=$top/run/slurmd-%n.pid
SlurmctldLogFile=$top/log/slurmctld.log
SlurmdLogFile=$top/log/slurmd-%n.log
# Per node too: srun --mpi=pmix makes its client directory spmix_appdir_UID_JOB.STEP under
# TmpFS on every node of a step, and the test nodes share one file system ("File exists").
TmpFS=/tmp/sweep-slurm/%n
NodeName=$host NodeAddr=$ctl_addr $hw State=UNKNOWN
NodeName=sweep-node1 NodeAddr=198.51.100.11 $hw State=UNKNOWN
NodeName=sweep-node2 NodeAddr=198.51.100.12 $hw State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=nodes Nodes=sweep-node[1-2] Default=NO MaxTime=INFINITE State=UP
PartitionName=short Nodes=$host Default=NO MaxTime=1 State=UP
CONF
changed=1
if cmp -s "$conf.new" "$conf"; then changed=0; rm -f "$conf.new"; else mv "$conf.new" "$conf"; fi
# slurmd loads a cgroup plugin whatever ProctrackType says; 22.05 has no "disabled", so
# let it autodetect (it only reads the hierarchy). Slurm reads cgroup.conf (and
# plugstack.conf, mpi.conf, ...: none here) next to slurm.conf, never from /etc/slurm.
echo "# written by tests/slurm/start-cluster.sh: defaults" >"$top/cgroup.conf"

# munge: its own key, socket, pid, seed and log, the daemon as user munge (which munged
# wants to own its files; its directory is not writable by anyone else).
if [[ ! -s "$munge_dir/munge.key" ]]; then
  dd if=/dev/urandom of="$munge_dir/munge.key" bs=1024 count=1 status=none
fi
chown -R munge:munge "$munge_dir"
chmod 0755 "$munge_dir"
chmod 0400 "$munge_dir/munge.key"
if [[ -z "$(our_pid "$munge_dir/munged.pid" munged "--socket=$munge_socket")" ]]; then
  # --force: start even over the stale socket of a munged that was killed.
  runuser -u munge -- munged --force "--socket=$munge_socket" "--key-file=$munge_dir/munge.key" \
    "--pid-file=$munge_dir/munged.pid" "--seed-file=$munge_dir/munged.seed" "--log-file=$munge_dir/munged.log"
  for _ in $(seq 50); do [[ -S "$munge_socket" ]] && break; sleep 0.1; done
fi

# A changed config restarts every Slurm daemon of ours: a stale one would keep an old node
# description.
if [[ $changed == 1 ]]; then stop_slurm; fi
if [[ -z "$(our_pid "$top/run/slurmctld.pid" slurmctld "$conf")" ]]; then
  require_free_port "$ctld_port" SlurmctldPort ""
  slurmctld -f "$conf" -c  # -c: forget saved jobs and node states of an earlier cluster
fi
for n in "${all_nodes[@]}"; do
  slurmd_up "$n" && continue
  stop_ours "$top/run/slurmd-$n.pid" slurmd "$conf"
  if [[ "$n" == "$host" ]]; then
    require_free_port "$slurmd_port" "SlurmdPort of $n" ""
    slurmd -f "$conf" -N "$n"
  else
    holder=$(node_holder "$n")
    [[ -n "$holder" ]] || { echo "start-cluster: test node $n is not up (tests/cluster/start-nodes.sh)" >&2; exit 1; }
    require_free_port "$slurmd_port" "SlurmdPort of $n" "$holder"
    # Inside the node: its hostname, its address, its loopback.
    nsenter -t "$holder" -u -n -- slurmd -f "$conf" -N "$n"
  fi
done

for _ in $(seq 120); do
  missing=()
  for n in "${all_nodes[@]}"; do node_ready "$n" || missing+=("$n"); done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "start-cluster: up: debug=$host nodes=${test_nodes[*]} ($(sinfo -h -N -n "$host" -o '%c CPUs, %m MB') each);" \
      "SLURM_CONF=$conf"
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
for n in "${missing[@]}"; do tail -n 20 "$top/log/slurmd-$n.log" >&2 || true; done
tail -n 20 "$top/log/slurmctld.log" >&2
exit 1
