#!/usr/bin/env bash
# How long building takes, in fresh clones of the current commit, timed the same way:
#   1. the quick start's build (sweep, sweep-train) with the compiler cache off: a new
#      machine's first build, packages already installed;
#   2. the whole build (every target, tests included) with the cache off;
#   3. the whole build in another fresh clone with the cache on, after 2 filled it: CI's
#      clean clone on a machine that built this commit before;
#   4. a one-file change (a comment and a new function in harness/driver/sweep_run.cpp,
#      so that the cache cannot answer) rebuilt in that clone: what a developer waits for.
# Prints one line per figure (wall seconds, CPU seconds). Needs the packages of
# containers/install-deps.sh; the clones and their build trees go under a temporary
# directory that is removed at the end. Changes nothing in this checkout.
#
#   tests/bench/build_bench.sh            # ~15 min on 2 idle cores
#   tests/bench/build_bench.sh --quick    # only 3 and 4 (the cache must hold this commit)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
quick=0
[[ "${1:-}" == --quick ]] && quick=1
if ! git -C "$here" diff --quiet HEAD; then
  echo "build_bench: the checkout has uncommitted changes; the clones build the commit (HEAD)" >&2
fi
tmp=$(mktemp -d /tmp/build_bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# timed LABEL DIR COMMAND...: runs COMMAND in DIR, prints wall and CPU seconds.
timed() {
  local label=$1 dir=$2 log
  shift 2
  log="$tmp/$(tr -c 'A-Za-z0-9.\n' '_' <<<"$label").log"
  local t0 t1 c0 c1
  t0=$(date +%s.%N)
  c0=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  (cd "$dir" && "$@") >"$log" 2>&1 || {
    echo "build_bench: $label failed; its log:" >&2
    tail -20 "$log" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  c1=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  awk -v l="$label" -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" -v c="$((c1 - c0))" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%-44s %7.1f s wall  %7.1f s CPU\n", l, w, c / hz}'
}

configure() { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null; }

clone() {
  git clone -q "$here" "$tmp/$1"
  git -C "$tmp/$1" checkout -q "$(git -C "$here" rev-parse HEAD)"
}

echo "build_bench: commit $(git -C "$here" rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if ((!quick)); then
  clone cold
  (cd "$tmp/cold" && configure)
  timed "1. quick start's build, cache off" "$tmp/cold" env CCACHE_DISABLE=1 \
    cmake --build build -j "$(nproc)" --target sweep sweep-train
  cmake --build "$tmp/cold/build" --target clean >/dev/null
  timed "2. whole build, cache off (fills it)" "$tmp/cold" env CCACHE_RECACHE=1 \
    cmake --build build -j "$(nproc)"
fi
clone warm
(cd "$tmp/warm" && configure)
timed "3. whole build, fresh clone, cache on" "$tmp/warm" cmake --build build -j "$(nproc)"
printf '\n// build_bench: a change the cache cannot answer\nint build_bench_touch() { return %d; }\n' "$$" \
  >>"$tmp/warm/harness/driver/sweep_run.cpp"
timed "4. one-file change (driver/sweep_run.cpp)" "$tmp/warm" cmake --build build -j "$(nproc)"
