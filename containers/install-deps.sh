#!/usr/bin/env bash
# Installs every Debian 12 package sweep needs to build, test and run.
# Idempotent: packages already installed are skipped, so a second run is quick.
# Used by the README quick start, .ci/run and the Dockerfiles.
#
#   containers/install-deps.sh            build + test + run deps
#   SWEEP_DEPS=build containers/install-deps.sh     what building and running sweep needs
#                                         (scripts/quickstart), without the test yardsticks
#   SWEEP_DEPS=runtime containers/install-deps.sh   only what sweep-train needs at run time
#   containers/install-deps.sh --list     print the chosen packages, one a line, and install
#                                         nothing (build-charliecloud-image.sh reads the
#                                         runtime list this way)
set -euo pipefail

runtime=(
  libtorch1.13 libopenblas0-pthread libhdf5-103-1 libyaml-cpp0.7 libxxhash0
  libcpp-httplib0.11  # `sweep serve` (the sweep binary links it)
  openmpi-bin
)
build=(
  build-essential cmake ninja-build pkg-config git ccache
  libtorch-dev libopenblas-dev libhdf5-dev libyaml-cpp-dev libcli11-dev libxxhash-dev
  libjemalloc-dev  # the `sweep` command's malloc, linked statically (SWEEP_ALLOCATOR)
  libcpp-httplib-dev  # `sweep serve`'s HTTP server
  libopenmpi-dev
  googletest libgtest-dev libbenchmark-dev python3
)
tests=(
  clang libclang-rt-14-dev  # libFuzzer + sanitizer runtimes for scripts/check-sanitize-fuzz
  clang-format clang-tidy  # scripts/check-style
  # independent yardsticks used only by tests and benchmarks
  python3-h5py python3-torch python3-numpy python3-xxhash python3-pandas python3-optuna
  python3-pip python3-venv python3-setuptools  # the Python package installed as a user would (test_pip_install)
  # a real, private Slurm cluster for the `slurm` tests (tests/slurm/start-cluster.sh)
  slurmctld slurmd slurm-client munge
  chromium  # renders the HTML report headless in tests/e2e/report_render_test.py
  charliecloud mmdebstrap  # containers/build-charliecloud-image.sh and the `container` tests
)

want=("${runtime[@]}")
case "${SWEEP_DEPS:-all}" in
  runtime) ;;
  build) want+=("${build[@]}") ;;
  all) want+=("${build[@]}" "${tests[@]}") ;;
  *) echo "install-deps: SWEEP_DEPS=${SWEEP_DEPS}: expected all, build or runtime" >&2; exit 2 ;;
esac
if [[ "${1:-}" == --list ]]; then
  printf '%s\n' "${want[@]}"
  exit 0
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all ${#want[@]} packages already installed"
fi

# LibTorch calls the system BLAS through the alternatives system; Debian's default there
# may be the reference BLAS, which is ~25x slower. Point libblas.so.3 at OpenBLAS.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3; do
  cand=$(update-alternatives --list "$lib-$arch" 2>/dev/null | grep openblas-pthread | head -n1 || true)
  if [[ -n "$cand" ]]; then
    sudo=""; if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    $sudo update-alternatives --set "$lib-$arch" "$cand" >/dev/null
  fi
done
