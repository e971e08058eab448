#!/usr/bin/env bash
# The sweep's index (issue 39): how long `sweep status` takes over N completed records of
# 150 steps when the index is warm (records unchanged since it was written), when it is
# missing (cold: every record read and verified, then the index written), and a full
# verification (`sweep verify`, which reads every record whatever the index says).
# Records come from make_records (RecordWriter, no training). Warm figures are the median
# of 3 runs after one warm-up run (page cache warm, as after a sweep). Times only: no
# target is asserted here; tests/bench/README.md compares them with the issue's.
# Usage: tests/bench/index_bench.sh [BUILD_DIR] [RUNS...]   (default: build 10000)
set -euo pipefail
build=${1:-build}
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(10000)
bin=$build/bin
for b in sweep make_records; do
  [[ -x $bin/$b ]] || { echo "index_bench: $bin/$b not built (ninja -C $build $b)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The records are synthetic and their durability is not what is measured: make_records runs
# with fsync made a no-op (an LD_PRELOAD shim built here), 5-7x faster to generate.
printf 'int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n' >"$tmp/nofsync.c"
cc -shared -fPIC -O2 -o "$tmp/nofsync.so" "$tmp/nofsync.c"

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# median_seconds CMD...: runs CMD 4 times (the first warms up), prints the median of the rest.
median_seconds() {
  local times=() t0 i
  for i in 0 1 2 3; do
    t0=$(date +%s%N)
    "$@" >/dev/null
    ((i == 0)) || times+=("$(ms "$t0")")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 2p | awk '{printf "%.3f", $1 / 1000}'
}
once() {  # once CMD...: seconds of one run
  local t0
  t0=$(date +%s%N)
  "$@" >/dev/null
  ms "$t0" | awk '{printf "%.3f", $1 / 1000}'
}

for n in "${sizes[@]}"; do
  d=$tmp/s$n
  t0=$(date +%s%N)
  LD_PRELOAD=$tmp/nofsync.so "$bin/make_records" --out "$d" --runs "$n" --steps 150 >/dev/null
  sync
  echo "generated $n records of 150 steps in $(ms "$t0") ms ($(du -sh "$d" | cut -f1))"
  sleep 3  # the index vouches only for records that last changed over 2 s ago
  printf '%-46s %8s s\n' "$n records: sweep verify (full read)" "$(once "$bin/sweep" verify "$d")"
  rm -f "$d/records.index"
  printf '%-46s %8s s\n' "$n records: sweep status, cold (no index)" "$(once "$bin/sweep" status "$d")"
  printf '%-46s %8s s\n' "$n records: sweep status, warm" "$(median_seconds "$bin/sweep" status "$d")"
  echo "index: $(du -h "$d/records.index" | cut -f1)"
  rm -rf "$d"
done
