#!/usr/bin/env bash
# Benchmarks of the results tools (issue 6), not ctest tests:
#   sweep report  over 1,000 generated records of 100 steps each   target < 3 s (html)
#   sweep compare of two generated 100,000-step records             target < 1 s
# Records come from make_records (RecordWriter, no training). Each figure is the median
# of 3 timed runs after one warm-up run (page cache warm, as after a sweep).
# Usage: tests/bench/results_bench.sh [BUILD_DIR]   (default: build). Exit 1 when over a target.
set -euo pipefail
build=${1:-build}
bin=$build/bin
for b in sweep make_records; do
  [[ -x $bin/$b ]] || { echo "results_bench: $bin/$b not built (ninja -C $build $b)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median_seconds CMD...: runs CMD 4 times (the first warms up), prints the median of the rest.
median_seconds() {
  local times=() t0 t1 i
  for i in 0 1 2 3; do
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    ((i == 0)) || times+=("$(((t1 - t0) / 1000000))")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 2p | awk '{printf "%.3f", $1 / 1000}'
}

over=0
check() {  # check NAME SECONDS TARGET
  local verdict=ok
  if awk -v s="$2" -v t="$3" 'BEGIN { exit !(s >= t) }'; then verdict="OVER TARGET"; over=1; fi
  printf '%-44s %7s s   (target < %s s)  %s\n' "$1" "$2" "$3" "$verdict"
}

t0=$(date +%s%N)
"$bin/make_records" --out "$tmp/report" --runs 1000 --steps 100 --mismatch-step 50 --diverged 5 --failed 5 >/dev/null
echo "generated 1,005 records of 100 steps in $(( ($(date +%s%N) - t0) / 1000000 )) ms ($(du -sh "$tmp/report" | cut -f1))"
check "sweep report, 1,000 records, html" "$(median_seconds "$bin/sweep" report "$tmp/report" -o "$tmp/r.html")" 3
for fmt in json md csv; do
  check "sweep report, 1,000 records, $fmt" "$(median_seconds "$bin/sweep" report "$tmp/report" --format $fmt -o "$tmp/r.$fmt")" 3
done
echo "html report: $(du -h "$tmp/r.html" | cut -f1)"

t0=$(date +%s%N)
"$bin/make_records" --out "$tmp/compare" --runs 2 --steps 100000 >/dev/null
runs=("$tmp"/compare/runs/*)
echo "generated 2 records of 100,000 steps in $(( ($(date +%s%N) - t0) / 1000000 )) ms ($(du -sh "${runs[0]}/record.h5" | cut -f1) each)"
"$bin/sweep" compare "${runs[0]}" "${runs[1]}" | sed -n 3p
check "sweep compare, 2 x 100,000 steps" "$(median_seconds "$bin/sweep" compare "${runs[0]}" "${runs[1]}")" 1
((over)) && echo "targets: MISSED (exit 1)" || echo "targets: all met (exit 0)"
exit $over
