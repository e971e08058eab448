#!/usr/bin/env bash
# Builds a Charliecloud directory image of sweep's run time: Debian from this machine's apt
# sources (mmdebstrap), the run-time packages of install-deps.sh at the versions installed
# on this machine (so libtorch, OpenBLAS, HDF5 and Open MPI in the image are the host's and
# a rank inside computes the bits a rank outside does), and this build's binaries in
# /opt/sweep/bin.
#
#   containers/build-charliecloud-image.sh OUT_DIR [BUILD_DIR]
#   containers/build-charliecloud-image.sh --cache-dir    prints the cache directory (below),
#                                         or nothing when the cache is off; builds nothing
#
# OUT_DIR     the image directory (`launch.container: {runtime: charliecloud, image: OUT_DIR,
#             trainer: /opt/sweep/bin/sweep-train}`); replaced only when its packages change
# BUILD_DIR   the CMake build directory whose bin/ holds sweep-train (default: build)
#
# SWEEP_IMAGE_MOUNTS="DIR..." creates each DIR in the image: ch-run cannot create a bind's
# destination in a read-only image, so every sweep directory outside /tmp (ch-run binds the
# host's /tmp itself) and every launch.container.binds destination needs one.
# Exit status: 0 ready, 1 failed, 2 usage, 77 mmdebstrap or ch-run is not installed.
#
# SWEEP_IMAGE_CACHE (default ~/.cache/sweep/charliecloud; "none" turns it off) keeps the
# Debian part of the last two package sets built or used on this machine, by key: a new
# OUT_DIR (another clone, another build directory) of the same packages is a copy of it,
# seconds instead of minutes.
#
# Idempotent: the Debian part is rebuilt only when the package list, the host's versions
# of them, the apt sources or the recipe below change (OUT_DIR/opt/sweep/packages.txt
# records what it holds); the binaries are copied only when their bytes differ, so an
# unchanged build keeps the image's digest. Every .deb comes from /var/cache/apt/archives when it is there, or from
# the archive once and then from OUT_DIR.debs/. Run it as root (mmdebstrap's root mode) or
# as a user with unprivileged user namespaces (its unshare mode).
set -euo pipefail

# The cache directory, "" when there is none (SWEEP_IMAGE_CACHE=none, or no home).
if [[ -n "${SWEEP_IMAGE_CACHE:-}" ]]; then cache=$SWEEP_IMAGE_CACHE
elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then cache=$XDG_CACHE_HOME/sweep/charliecloud
elif [[ -n "${HOME:-}" ]]; then cache=$HOME/.cache/sweep/charliecloud
else cache=""; fi
[[ "$cache" == none ]] && cache=""
if [[ $# -eq 1 && "$1" == --cache-dir ]]; then
  [[ -z "$cache" ]] || printf '%s\n' "$cache"
  exit 0
fi

if [[ $# -lt 1 || $# -gt 2 || "$1" == -* ]]; then
  echo "usage: $0 OUT_DIR [BUILD_DIR] | --cache-dir" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "$1")
build=$(realpath -m "${2:-$here/../build}")
debs="$out.debs"
bins=(sweep-train sweep-rank sweep sweep-blas-probe)  # sweep-train is required, the rest if built
started=$(date +%s)

for tool in mmdebstrap ch-run; do
  command -v "$tool" >/dev/null || { echo "$0: $tool not found (containers/install-deps.sh installs it)" >&2; exit 77; }
done
[[ -x "$build/bin/sweep-train" ]] || { echo "$0: $build/bin/sweep-train not found: build it first" >&2; exit 1; }

# The run-time packages pinned to this machine's versions: apt refuses a version the
# sources do not have, rather than silently taking another.
mapfile -t packages < <(SWEEP_DEPS=runtime "$here/install-deps.sh" --list)
pins=()
for p in "${packages[@]}"; do
  v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
  [[ -n "$v" ]] || { echo "$0: $p is not installed here (SWEEP_DEPS=runtime containers/install-deps.sh)" >&2; exit 1; }
  pins+=("$p=$v")
done
# shellcheck source=/dev/null
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
# This machine's Debian sources (not third-party ones such as a vendor's repository).
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] && grep -qE '^[^#]*(deb |URIs:).*debian' "$f" && sources+=("$f")
done
((${#sources[@]})) || { echo "$0: no Debian apt sources under /etc/apt" >&2; exit 1; }
recipe=2  # bump when the mmdebstrap call below changes what it builds
key=$( (printf '%s\n' "$recipe" "$suite" "$arch" "${pins[@]}"; cat "${sources[@]}") | sha256sum | cut -c1-16)
holds_key() { [[ -f "$1/opt/sweep/packages.txt" && "$(head -n1 "$1/opt/sweep/packages.txt")" == "key $key" ]]; }

if holds_key "$out"; then
  echo "build-charliecloud-image: $out already holds these packages (key $key)"
elif [[ -n "$cache" ]] && holds_key "$cache/$key"; then
  # A copy, never links: nothing written into OUT_DIR can reach the cache.
  rm -rf "$out.new"
  cp -a --reflink=auto "$cache/$key" "$out.new"
  touch "$cache/$key"  # the pruning below keeps the keys used last
  rm -rf "$out"
  mv "$out.new" "$out"
  echo "build-charliecloud-image: $out copied from the cache $cache (key $key)"
else
  echo "build-charliecloud-image: building $out ($suite/$arch: ${pins[*]})"
  mkdir -p "$debs"
  rm -rf "$out.new"
  # Hooks run inside mmdebstrap. The setup hook links every .deb this machine already has
  # into the new root's apt cache (apt checks each against the index before using it);
  # the customize hook keeps what was downloaded for the next build and points
  # libblas.so.3 at OpenBLAS as install-deps.sh does on the host. Font caches hold the time
  # they were made (fontconfig remakes them when needed): without them two builds of the
  # same packages and binaries are the same bytes, so they get one digest.
  alternatives="for lib in libblas.so.3 liblapack.so.3; do chroot \"\$1\" update-alternatives --set \$lib-$multiarch /usr/lib/$multiarch/openblas-pthread/\$lib >/dev/null; done"
  # shellcheck disable=SC2016  # "$1" is the new root, expanded by mmdebstrap in each hook
  mmdebstrap --variant=essential --format=directory --quiet \
    --skip=download/empty --skip=essential/unlink \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --include="$(IFS=,; echo "${pins[*]}")" \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook="find /var/cache/apt/archives '$debs' -maxdepth 1 -name '*.deb' -exec cp -l -n -t \"\$1\"/var/cache/apt/archives {} + 2>/dev/null || find /var/cache/apt/archives '$debs' -maxdepth 1 -name '*.deb' -exec cp -n -t \"\$1\"/var/cache/apt/archives {} +" \
    --customize-hook="cd \"\$1\"/var/cache/apt/archives && for f in *.deb; do [ -e /var/cache/apt/archives/\$f ] || cp -l -n \$f '$debs'/ 2>/dev/null || cp -n \$f '$debs'/; done" \
    --customize-hook="$alternatives" \
    --customize-hook='rm -f "$1"/var/cache/fontconfig/*' \
    "$suite" "$out.new" "${sources[@]}" 2>&1 |
    grep -v '^I: ' || true
  [[ -x "$out.new/usr/bin/env" ]] || { echo "$0: mmdebstrap failed" >&2; exit 1; }
  mkdir -p "$out.new/opt/sweep/bin"
  { echo "key $key"; printf '%s\n' "${pins[@]}"; } >"$out.new/opt/sweep/packages.txt"
  # Into the cache whole or not at all (a copy renamed into place), and only the two keys
  # built or used last kept (an image is about 1 GB). A cache that cannot be written costs
  # nothing but time.
  if [[ -n "$cache" ]] && mkdir -p "$cache" 2>/dev/null; then
    tmp="$cache/.$key.$$"
    holds_key "$cache/$key" || rm -rf "${cache:?}/$key"  # a leftover of no use
    if cp -a --reflink=auto "$out.new" "$tmp" 2>/dev/null && mv -T "$tmp" "$cache/$key" 2>/dev/null; then
      echo "build-charliecloud-image: kept in the cache $cache (key $key)"
      find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%T@ %p\n' | sort -rn | tail -n +3 |
        cut -d' ' -f2- | xargs -r -d '\n' rm -rf
    fi
    rm -rf "$tmp"
  fi
  rm -rf "$out"
  mv "$out.new" "$out"
fi

# The binaries, copied only when they changed (the digest covers contents and modes).
for b in "${bins[@]}"; do
  [[ -x "$build/bin/$b" ]] || continue
  if ! cmp -s "$build/bin/$b" "$out/opt/sweep/bin/$b"; then
    install -m 0755 "$build/bin/$b" "$out/opt/sweep/bin/$b"
    echo "build-charliecloud-image: copied $b"
  fi
done
for m in ${SWEEP_IMAGE_MOUNTS:-}; do
  [[ "$m" == /* ]] || { echo "$0: SWEEP_IMAGE_MOUNTS: $m is not an absolute path" >&2; exit 2; }
  mkdir -p "$out$m"
done
# Everything sweep-train links must resolve inside the image, against the image's libraries.
# (ch-run needs USER; an unprivileged build cannot chroot.)
if missing=$(USER="${USER:-$(id -un)}" ch-run "$out" -- /usr/bin/ldd /opt/sweep/bin/sweep-train 2>&1 | grep 'not found'); then
  echo "$0: libraries sweep-train needs are not in the image:" >&2
  echo "$missing" >&2
  exit 1
fi
# Same versions as the host, dependencies included (a newer host library would be a
# different build of the same math).
differ=$(join <(dpkg-query -W -f='${Package} ${Version}\n' | sort) \
  <(dpkg-query --admindir="$out/var/lib/dpkg" -W -f='${Package} ${Version}\n' | sort) | awk '$2 != $3' || true)
[[ -z "$differ" ]] || echo "build-charliecloud-image: $(wc -l <<<"$differ") packages differ from this machine's" \
  "version (updates this machine has not installed): $(cut -d' ' -f1 <<<"$differ" | tr '\n' ' ')" >&2
echo "build-charliecloud-image: $out ready: $(du -sh "$out" | cut -f1), $(find "$out" | wc -l) entries," \
  "$(($(date +%s) - started)) s"
