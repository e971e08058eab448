#!/usr/bin/env bash
# Readers of a large sweep (issue 39): how long each takes over N completed records of 150
# steps, cold and warm.
#   - `sweep verify`: every record read and its digest verified (the full read), the index
#     written anew;
#   - `sweep status` and `sweep plan GRID` (the grid of those N runs): with the index
#     missing (cold) and warm;
#   - `sweep run GRID` again: the rerun's skip check, which starts nothing (it ends by
#     writing the sweep's report, timed apart below);
#   - `sweep report --format html|csv|json`: with the record cache missing (cold: every
#     record read, the cache written) and warm;
#   - `sweep compare A B` of the sweep and a second sweep directory of the same records
#     (`cp -al`: hard links, so the page cache holds one copy; B's cache starts cold);
#   - `sweep export` (CSV to a file), warm.
# Records come from make_records (RecordWriter, no training). Warm figures are the median
# of 3 runs after one warm-up run (page cache warm, as after a sweep), each with the peak
# resident memory of those runs. Times only: no target is asserted here;
# tests/bench/README.md compares them with the issue's.
# Usage: tests/bench/index_bench.sh [BUILD_DIR] [RUNS...]   (default: build 10000; RUNS a
#        multiple of 50). SWEEP_BENCH_DIR=D keeps the generated directories in D (D/sN)
#        and reuses them on the next call instead of generating them again.
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
keep=${SWEEP_BENCH_DIR:-}

# The records are synthetic and their durability is not what is measured: make_records runs
# with fsync made a no-op (an LD_PRELOAD shim built here), 5-7x faster to generate.
printf 'int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n' >"$tmp/nofsync.c"
cc -shared -fPIC -O2 -o "$tmp/nofsync.so" "$tmp/nofsync.c"

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# timed CMD...: one run; prints "SECONDS PEAK_KB".
timed() {
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err" || {
    cat "$tmp/err" >&2
    return 1
  }
  cat "$tmp/time"
}
# row LABEL MODE CMD...: MODE once (one run) or warm (one warm-up, then the median of 3
# and the largest peak of the 3); prints the row.
row() {
  local label=$1 mode=$2 t secs=() kb=0
  shift 2
  if [[ $mode == warm ]]; then
    timed "$@" >/dev/null
    for _ in 1 2 3; do
      t=$(timed "$@")
      secs+=("${t% *}")
      ((${t#* } > kb)) && kb=${t#* }
    done
    t=$(printf '%s\n' "${secs[@]}" | sort -n | sed -n 2p)
  else
    t=$(timed "$@")
    kb=${t#* }
    t=${t% *}
  fi
  printf '%-52s %9s s %8s MB\n' "$label" "$t" "$((kb / 1024))"
}

for n in "${sizes[@]}"; do
  ((n % 50 == 0)) || { echo "index_bench: $n is not a multiple of 50" >&2; exit 2; }
  d=${keep:-$tmp}/s$n
  if [[ -z $keep || ! -d $d/runs ]]; then
    rm -rf "$d"
    t0=$(date +%s%N)
    LD_PRELOAD=$tmp/nofsync.so "$bin/make_records" --out "$d" --runs "$n" --steps 150 >/dev/null
    sync
    echo "generated $n records of 150 steps in $(ms "$t0") ms ($(du -sh --exclude=record-cache "$d" | cut -f1))"
    sleep 3  # the index and the cache vouch only for records that last changed over 2 s ago
  fi
  # The grid of make_records' runs: every point is done, so `sweep run` starts nothing.
  cat >"$tmp/grid.yaml" <<EOF
name: bench
grid:
  train.lr: [1.0e-3, 2.0e-3, 3.0e-3, 5.0e-3, 1.0e-2]
  train.clip_norm: [0.0, 0.5, 1.0, 2.0, 4.0]
  train.seed: {range: [0, $((n / 50))]}
zip:
  - dist.world_size: [1, 2]
    train.accum: [2, 1]
EOF
  echo "$n records                                              wall     peak RSS"
  row "sweep verify (full read)" once "$bin/sweep" verify "$d"
  rm -f "$d/records.index"
  row "sweep status, cold (no index)" once "$bin/sweep" status "$d"
  row "sweep status, warm" warm "$bin/sweep" status "$d"
  rm -f "$d/records.index"
  row "sweep plan, cold (no index)" once "$bin/sweep" plan "$tmp/grid.yaml" --out "$d"
  row "sweep plan, warm" warm "$bin/sweep" plan "$tmp/grid.yaml" --out "$d"
  rm -rf "$d/record-cache"
  for f in html csv json; do
    [[ $f == html ]] && row "sweep report --format html, cold (no cache)" once "$bin/sweep" report "$d" -o "$tmp/r.html"
    row "sweep report --format $f, warm" warm "$bin/sweep" report "$d" --format "$f" -o "$tmp/r.$f"
  done
  row "sweep run GRID again (skip check, then its report)" warm "$bin/sweep" run "$tmp/grid.yaml" --out "$d"
  grep -q "0 completed, $n already done" <("$bin/sweep" run "$tmp/grid.yaml" --out "$d") ||
    { echo "index_bench: the rerun did not find every run done" >&2; exit 1; }
  rm -rf "$d.b"
  cp -al "$d" "$d.b"
  rm -rf "$d.b/record-cache"
  row "sweep compare A B, B cold (no cache)" once "$bin/sweep" compare "$d" "$d.b"
  row "sweep compare A B, warm" warm "$bin/sweep" compare "$d" "$d.b"
  rm -rf "$d.b"
  row "sweep export (csv), warm" warm "$bin/sweep" export "$d" -o "$tmp/e.csv"
  echo "index: $(du -h "$d/records.index" | cut -f1); record cache: $(du -sh "$d/record-cache" | cut -f1)"
  [[ -n $keep ]] || rm -rf "$d"
done
