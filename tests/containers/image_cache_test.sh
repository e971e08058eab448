#!/usr/bin/env bash
# The charliecloud image cache of containers/build-charliecloud-image.sh: a new image
# directory of the packages the cache holds is a copy of the cached Debian part (the same
# entries, types, modes, owners and bytes) plus this build's binaries, made in seconds; it
# runs sweep-train; and nothing written into the copy reaches the cache.
#
#   tests/containers/image_cache_test.sh SOURCE_DIR BUILD_DIR
#
# Exit status: 0 passed, 1 failed, 77 skipped (no ch-run or mmdebstrap, or the cache holds
# no image of the fixture's packages: the fixture found its image already built, from
# before the cache, and built none).
# shellcheck disable=SC2016  # expect's conditions are evaluated in the function, on purpose
set -euo pipefail
src=$1 build=$2
image=$build/charliecloud-image
cache=$("$src/containers/build-charliecloud-image.sh" --cache-dir)  # the script's own answer
[[ -n "$cache" ]] || { echo "skipped: the image cache is off (SWEEP_IMAGE_CACHE=none, or no home)"; exit 77; }
if ! command -v ch-run >/dev/null || ! command -v mmdebstrap >/dev/null; then
  echo "skipped: no ch-run or mmdebstrap"
  exit 77
fi
[[ -f "$image/opt/sweep/packages.txt" ]] || { echo "FAIL: no image at $image (the charliecloud_image fixture)"; exit 1; }
key=$(head -n1 "$image/opt/sweep/packages.txt" | cut -d' ' -f2)
if [[ ! -d "$cache/$key" ]]; then
  echo "skipped: $cache holds no image of key $key (the fixture's image was built before the cache)"
  exit 77
fi
work=$(mktemp -d "$build/image-cache-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail=0
expect() { if eval "$1"; then echo "ok   $2"; else echo "FAIL $2"; fail=1; fi; }

start=$(date +%s)
out=$(SWEEP_IMAGE_MOUNTS="" "$src/containers/build-charliecloud-image.sh" "$work/image" "$build" 2>&1) ||
  { echo "$out"; exit 1; }
echo "$out"
expect '[[ "$out" == *"copied from the cache $cache (key $key)"* ]]' "the Debian part came from the cache"
expect '[[ "$out" != *"building "* ]]' "nothing was built"
# What the Debian part holds: every entry but the binaries (a directory's size is its
# history's, not its contents': left out), and the bytes of every regular file.
listing() {
  (cd "$1" && {
    find . -path ./opt/sweep/bin -prune -o -type d -printf '%p d %m %U %G\n'
    find . -path ./opt/sweep/bin -prune -o ! -type d -printf '%p %y %m %U %G %s %l\n'
  } | LC_ALL=C sort)
}
contents() { (cd "$1" && find . -path ./opt/sweep/bin -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }
expect 'diff <(listing "$cache/$key") <(listing "$work/image") >"$work/listing.diff"' \
  "the cache's entries, types, modes, owners and sizes"
head -20 "$work/listing.diff"
expect '[[ "$(contents "$cache/$key")" == "$(contents "$work/image")" ]]' "the cache's bytes in every file"
for b in sweep-train sweep-rank sweep sweep-blas-probe; do
  [[ -x "$build/bin/$b" ]] && expect 'cmp -s "$build/bin/$b" "$work/image/opt/sweep/bin/$b"' "this build's $b"
done
expect 'USER=${USER:-$(id -un)} ch-run "$work/image" -- /opt/sweep/bin/sweep-train --help >/dev/null' \
  "sweep-train starts in the copy"
# The copy is a copy: writing into it leaves the cache as it was.
victim=usr/bin/env
# shellcheck disable=SC2034  # read in the expect below
before=$(sha256sum <"$cache/$key/$victim")
echo tampered >>"$work/image/$victim"
expect '[[ "$(sha256sum <"$cache/$key/$victim")" == "$before" ]]' "a write into the copy does not reach the cache"
echo "image cache: $(($(date +%s) - start)) s"
exit $fail
