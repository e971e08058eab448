#!/bin/bash
# Fetches the Debian 12 packages that device_check.sh unpacks on a GPU machine that has
# PyTorch but no package registry: HDF5, yaml-cpp, CLI11, xxHash, jemalloc, GoogleTest, Open MPI,
# and the shared libraries they load that a machine with a CUDA PyTorch does not
# usually have. Compilers and the base system are not fetched: the GPU machine has its
# own. (The full dependency closure, compilers included, is ~240 MB; this is ~13 MB.)
#
#   tests/gpu/fetch-debs.sh [DIR]     (default tests/gpu/debs; git-ignored)
#
# Run it here (Debian 12, after `apt-get update`; no root needed), then carry DIR to the
# GPU machine with the working tree. device_check.sh lists any library still missing
# there (ldd) before it runs anything.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-tests/gpu/debs}
packages=(
  # headers, CMake/pkg-config files and the libraries we link
  libhdf5-dev libhdf5-103-1 libsz2 libaec0 hdf5-helpers
  libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libxxhash-dev libxxhash0 libgtest-dev
  libjemalloc-dev  # libjemalloc_pic.a, linked into `sweep` statically (SWEEP_ALLOCATOR=auto)
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common
  # what Open MPI loads at run time
  libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1
  libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2 libnuma1 libltdl7 libgfortran5
  libpciaccess0 libudev1
)
mkdir -p "$dir"
(cd "$dir" && apt-get download "${packages[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
echo "fetch-debs: $(ls "$dir"/*.deb | wc -l) packages, $(du -sh "$dir" | cut -f1), in $dir"
