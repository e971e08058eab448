#!/usr/bin/env bash
# `sweep serve` over a large sweep (issue 59): how long the index, the sweep's page, its
# status endpoint and a run page take to answer once the server has read the sweep (warm), against the
# issue's 1 s. The records come from make_records (the record-index bench's generator, as
# tests/bench/index_bench.sh makes them). Cold figures are the server's own first scan and
# first report build, which run on its threads, not in a request: printed apart, with the
# time of the first request of the index and of the sweep's page (answered at once).
# Usage: tests/bench/serve_bench.sh [BUILD_DIR] [RUNS]   (default: build 10000; RUNS a
#        multiple of 50). SWEEP_BENCH_DIR=D keeps the records in D/sN and reuses them
#        (index_bench.sh's directories too). SWEEP_BENCH_STEPS=S makes records of S steps
#        (default 150: 100,000 of them take 32 GB). Exit 1 when a warm answer takes 1 s or more.
set -euo pipefail
build=${1:-build}
n=${2:-10000}
bin=$build/bin
for b in sweep make_records; do
  [[ -x $bin/$b ]] || { echo "serve_bench: $bin/$b not built (ninja -C $build $b)" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "serve_bench: needs curl" >&2; exit 2; }
tmp=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill -INT "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
d=${SWEEP_BENCH_DIR:-$tmp}/s$n
if [[ ! -d $d/runs ]]; then
  # Durability is not what is measured: fsync made a no-op while generating (index_bench.sh).
  printf 'int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n' >"$tmp/nofsync.c"
  cc -shared -fPIC -O2 -o "$tmp/nofsync.so" "$tmp/nofsync.c"
  LD_PRELOAD=$tmp/nofsync.so "$bin/make_records" --out "$d" --runs "$n" --steps "${SWEEP_BENCH_STEPS:-150}" >/dev/null
  sleep 3  # the index and the cache vouch only for records that last changed over 2 s ago
fi

t0=$(date +%s%N)
"$bin/sweep" serve "$d" --port 0 >"$tmp/out" 2>"$tmp/err" &
server=$!
until grep -q 'http://' "$tmp/out" 2>/dev/null; do sleep 0.1; kill -0 "$server" || { cat "$tmp/err"; exit 1; }; done
url=$(grep -o 'http://[0-9.:]*/' "$tmp/out")
name=$(basename "$d")
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# Cold: the first answers, before the server has read anything (they say so, and start
# its scan and report build; no request waits for either).
printf '%-28s %6.3f s (cold: the first request)\n' "/" "$(curl -s -o /dev/null -w '%{time_total}' "$url")"
printf '%-28s %6.3f s (cold: the first request)\n' "/s/$name/" "$(curl -s -o /dev/null -w '%{time_total}' "${url}s/$name/")"
until curl -s "${url}s/$name/status.json" | grep -q '"ready":true'; do sleep 0.2; done
echo "$n records: first scan (cold or warm index) done $(ms "$t0") ms after start"
t1=$(date +%s%N)
# The report is built once status.json names a report version (the page before it is a
# placeholder of a few KB, which must not be timed as the report).
curl -s -o /dev/null "${url}s/$name/"
until curl -s "${url}s/$name/status.json" | grep -q '"report":[1-9]'; do sleep 0.5; done
echo "$n records: first report built $(ms "$t1") ms after it was asked for"

# time PATH: the median of 5 answers, and the largest.
status=0
time_path() {
  local secs=() t
  for _ in 1 2 3 4 5; do secs+=("$(curl -s -o /dev/null -w '%{time_total}' "$url$1")"); done
  t=$(printf '%s\n' "${secs[@]}" | sort -n | sed -n 3p)
  local worst
  worst=$(printf '%s\n' "${secs[@]}" | sort -n | tail -1)
  printf '%-28s median %6.3f s, worst %6.3f s (%s)\n' "/$1" "$t" "$worst" "${secs[*]}"
  awk -v w="$worst" 'BEGIN { exit !(w >= 1) }' && status=1
  return 0
}
time_path ""
time_path "s/$name/"
time_path "s/$name/status.json"
# A run page: its own record and the sweep-level flags from the server's scan, the same
# cost at any sweep size.
time_path "s/$name/run/$(ls "$d/runs" | head -1)"
echo "page size: $(curl -s "${url}s/$name/" | wc -c) bytes; server peak RSS: $(grep VmHWM /proc/$server/status | awk '{print $2 / 1024 " MB"}')"
exit $status
