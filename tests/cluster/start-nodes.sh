#!/usr/bin/env bash
# Starts a test cluster of "nodes" on this one machine: each node is a Linux network
# namespace and UTS namespace of its own (own hostname, own interface and address), joined
# to the host by a veth pair on a bridge. Open MPI between two nodes must go over TCP, as
# between real machines; tests/cluster/node-rsh enters a node (Open MPI's rsh agent in
# tests; users keep ssh). Idempotent: a node that is up is left as it is.
#
# Addresses: 198.51.100.0/24 (TEST-NET-2, documentation only), held by our own namespaces:
# the bridge (the host side) is .1, node i is .(10+i). Nothing leaves the machine: the
# bridge has no uplink and no route is added.
#
#   tests/cluster/start-nodes.sh [N]     # N nodes, default 2: sweep-node1 .. sweep-nodeN
#   tests/cluster/start-nodes.sh --stop  # removes them
#
# Needs root, iproute2 and util-linux (unshare, nsenter).
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "start-nodes: needs root" >&2; exit 1; fi
for bin in ip unshare nsenter; do
  command -v "$bin" >/dev/null || { echo "start-nodes: $bin missing" >&2; exit 1; }
done

state=/run/sweep-nodes
bridge=swbr0
subnet=198.51.100
hosts_mark="# sweep test node (tests/cluster/start-nodes.sh)"

# A node is two persistent namespaces, bound to files so that no process has to keep
# them alive (killing every process of a node, as a test of a lost node does, leaves the
# node there to come back): /run/netns/NAME (network, ip netns) and $state/NAME.uts (its
# hostname). $state/NAME.pid is a process sleeping inside both, for `nsenter -t PID -u -n`.
holder_pid() { cat "$state/$1.pid" 2>/dev/null || true; }
enter() { nsenter --uts="$state/$1.uts" --net="/run/netns/$1" -- "${@:2}"; }
node_up() {
  [[ -e "$state/$1.uts" ]] && [[ "$(enter "$1" hostname 2>/dev/null)" == "$1" ]] &&
    enter "$1" ip -4 addr show dev eth0 2>/dev/null | grep -q "inet $2/"
}
start_holder() {
  local pid
  pid=$(holder_pid "$1")
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then return; fi
  setsid nsenter --uts="$state/$1.uts" --net="/run/netns/$1" -- sleep infinity </dev/null >/dev/null 2>&1 &
  echo $! >"$state/$1.pid"
}

stop_node() {
  local name=$1 pid
  # Everything running in the node (orted, ranks, slurmd) goes with it.
  for p in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  rm -f "$state/$name.pid"
  umount "$state/$name.uts" 2>/dev/null || true
  rm -f "$state/$name.uts"
  ip netns del "$name" 2>/dev/null || true
  ip link del "v-$name" 2>/dev/null || true
}

if [[ "${1:-}" == "--stop" ]]; then
  for f in "$state"/*.uts; do [[ -e "$f" ]] && stop_node "$(basename "$f" .uts)"; done
  ip link del "$bridge" 2>/dev/null || true
  sed -i "/$hosts_mark/d" /etc/hosts
  echo "start-nodes: stopped"
  exit 0
fi

n=${1:-2}
[[ "$n" =~ ^[1-9]$ ]] || { echo "start-nodes: N must be 1..9, got '$n'" >&2; exit 2; }
mkdir -p "$state"

if ! ip link show "$bridge" >/dev/null 2>&1; then
  ip link add "$bridge" type bridge
fi
ip addr replace "$subnet.1/24" dev "$bridge"
ip link set "$bridge" up

for i in $(seq 1 "$n"); do
  name=sweep-node$i
  addr=$subnet.$((10 + i))
  if node_up "$name" "$addr"; then
    start_holder "$name"
    continue
  fi
  stop_node "$name"
  ip netns add "$name"
  ip link add "v-$name" type veth peer name eth0 netns "$name"
  ip link set "v-$name" master "$bridge" up
  ip netns exec "$name" ip link set lo up
  ip netns exec "$name" ip addr add "$addr/24" dev eth0
  ip netns exec "$name" ip link set eth0 up
  touch "$state/$name.uts"
  unshare --uts="$state/$name.uts" hostname "$name"
  node_up "$name" "$addr" || { echo "start-nodes: $name did not come up" >&2; exit 1; }
  start_holder "$name"
  sed -i "/ $name $hosts_mark\$/d" /etc/hosts
  echo "$addr $name $hosts_mark" >>/etc/hosts
done

echo "start-nodes: $n nodes up: $(for i in $(seq 1 "$n"); do printf 'sweep-node%s=%s ' "$i" "$subnet.$((10 + i))"; done)"
