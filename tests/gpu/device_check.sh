#!/bin/bash
# The one-shot GPU check (issue 8), for a machine with one GPU and a CUDA PyTorch 2.x but
# no package registry. Under 8 minutes: build against that PyTorch's LibTorch, run the
# GPU tests, run the throughput benchmark. Exit 0 only when every check passed.
#
#   tests/gpu/device_check.sh          on the GPU machine
#   tests/gpu/device_check.sh --cpu    rehearsal without a GPU: the same checks on the CPU,
#                                      against this machine's own packages
#
# Before: run tests/gpu/fetch-debs.sh here; it leaves the Debian packages we build
# against (HDF5, yaml-cpp, CLI11, xxHash, GoogleTest, Open MPI) in tests/gpu/debs, which
# travels with the working tree. This script unpacks them into build-gpu/prefix (no
# root, no package manager). Output: build-gpu/device-check/, one log per step.
#
# First the device kernels (tree, norm, AdamW, finite check) against the host's, bit for bit
# (device_numerics_check, CUDA builds only). Then checks, each against two records compared
# with `sweep compare` (exit 0 = bit-identical):
#   1. determinism: the same config twice on the GPU, bit-identical;
#   2. canonical reduction: W=1, A=4 against W=2, A=2 (two ranks on the one GPU, same
#      global batch), bit-identical;
#   3. fp16 loss scaling: an injected inf gradient skips the step and halves the scale;
#   4. the fused-kernel unit tests (CPU kernels, CUDA build);
# then tests/bench/train_bench.py --device cuda: tokens/s of sweep-train and PyTorch eager
# on the same model, their ratio and the MFU against the GPU's fp32 matmul peak.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
device=cuda
[ "${1:-}" = --cpu ] && device=cpu
build=${BUILD:-build-gpu}
out=$build/device-check
prefix=$root/$build/prefix
debs=${DEBS:-tests/gpu/debs}
python=${PYTHON:-python3}  # the Python whose PyTorch (and LibTorch) to use
mkdir -p "$out"
say() { echo "device_check: $*" | tee -a "$out/summary.txt"; }
fail=0
check() {  # check NAME COMMAND...: runs it, logs it, records pass/fail
  local name=$1
  shift
  if "$@" >"$out/$name.log" 2>&1; then say "PASS $name"; else say "FAIL $name (log: $out/$name.log)"; fail=1; fi
}
: >"$out/summary.txt"
t0=$SECONDS

# --- what this machine has -------------------------------------------------------------
if ! "$python" - >"$out/torch.txt" 2>&1 <<'EOF'; then
import torch, torch.utils
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-",
      "cxx11_abi", torch._C._GLIBCXX_USE_CXX11_ABI, "cmake", torch.utils.cmake_prefix_path)
EOF
  say "FAIL $python cannot import torch (set PYTHON): $(tail -1 "$out/torch.txt")"
  exit 1
fi
say "$(cat "$out/torch.txt")"
if [ "$device" = cuda ]; then
  "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    { say "FAIL no GPU visible to PyTorch"; exit 1; }
  # Debian's libraries are built with the C++11 ABI; a LibTorch without it cannot link them.
  "$python" -c 'import torch, sys; sys.exit(0 if torch._C._GLIBCXX_USE_CXX11_ABI else 1)' ||
    { say "FAIL this PyTorch uses the old C++ ABI; Debian's libraries need _GLIBCXX_USE_CXX11_ABI=1"; exit 1; }
fi

# --- the carried packages ----------------------------------------------------------------
cmake_args=()
if compgen -G "$debs/*.deb" >/dev/null; then
  mkdir -p "$prefix"
  for d in "$debs"/*.deb; do
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$d" "$prefix"; else
      (tmp=$(mktemp -d) && cd "$tmp" && ar x "$root/$d" && tar -xf data.tar.* -C "$prefix" && rm -rf "$tmp"); fi
  done
  lib=$prefix/usr/lib/x86_64-linux-gnu
  export PATH=$prefix/usr/bin:$PATH
  export LD_LIBRARY_PATH=$lib:$lib/openmpi/lib:$lib/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export OPAL_PREFIX=$prefix/usr  # a relocated Open MPI finds its components through this
  # HDF5 by hand: Debian's h5cc wrapper would name /usr paths and static-only libraries.
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DMPI_HOME="$lib/openmpi"
    -DHDF5_C_COMPILER_EXECUTABLE=/nonexistent-h5cc -DHDF5_C_INCLUDE_DIR="$prefix/usr/include/hdf5/serial"
    -DHDF5_C_LIBRARY_hdf5="$lib/hdf5/serial/libhdf5.so")
  say "unpacked $(ls "$debs"/*.deb | wc -l) packages into $prefix"
elif [ "$device" = cuda ]; then
  say "note: no $debs/*.deb; building against whatever this machine has"
fi

# --- build ---------------------------------------------------------------------------------
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
with_cuda=OFF
[ "$device" = cuda ] && command -v nvcc >/dev/null && with_cuda=ON
rm -f "$build/CMakeCache.txt"  # a cache from another set-up would keep its library paths
check configure cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSWEEP_TORCH_FROM_PYTHON=ON \
  -DSWEEP_PYTHON="$(command -v "$python")" -DSWEEP_WITH_CUDA=$with_cuda "${cmake_args[@]}"
targets=(sweep sweep-train sweep-rank trainer_test)
[ $with_cuda = ON ] && targets+=(device_numerics_check)
check build cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
bin=$root/$build/bin
[ $fail = 0 ] || { say "build failed; nothing run"; exit 1; }
missing=$(ldd "$bin/sweep-train" "$bin/sweep" | grep 'not found' | sort -u || true)
[ -z "$missing" ] || { say "FAIL shared libraries not found: $missing"; exit 1; }
say "built in $((SECONDS - t0)) s"

# --- device kernels against the host's, bit for bit (one GPU is enough) -----------------------
if [ $with_cuda = ON ]; then
  check device_numerics "$bin/device_numerics_check" --require-device
  grep -E '^device_numerics_check: (PASS|FAIL)' "$out/device_numerics.log" | tee -a "$out/summary.txt" || true
fi

# --- GPU tests ----------------------------------------------------------------------------
runs=$out/runs
rm -rf "$runs"
mkdir -p "$runs"
model="model: {layers: 2, d_model: 128, heads: 4, vocab: 256, seq_len: 64}"
config() {  # config NAME WORLD ACCUM [EXTRA]: writes runs/NAME.yaml (global batch 8 sequences)
  printf '%s\ntrain: {steps: 20, micro_batch: 2, accum: %s, lr: 1.0e-3, clip_norm: 1.0, log_every: 1%s}\ndist: {world_size: %s}\n%s' \
    "$model" "$3" "${5:-}" "$2" "${4:-}" >"$runs/$1.yaml"
}
train() {  # train NAME WORLD: runs sweep-train on the device
  local launcher=()
  [ "$2" -gt 1 ] && launcher=(mpirun --allow-run-as-root --oversubscribe -n "$2")
  "${launcher[@]}" "$bin/sweep-train" --config "$runs/$1.yaml" --out "$runs/$1" --device "$device"
}
identical() { "$bin/sweep" compare "$runs/$1/record.h5" "$runs/$2/record.h5"; }

config same_a 1 4
config same_b 1 4
check determinism_run1 train same_a 1
check determinism_run2 train same_b 1
check determinism_identical identical same_a same_b

config w1a4 1 4
config w2a2 2 2
check canonical_w1a4 train w1a4 1
check canonical_w2a2 train w2a2 2
check canonical_identical identical w1a4 w2a2

config fp16 1 4 "fault: {inf_grad_step: 5}" ", precision: fp16, loss_scale_init: 65536"
check fp16_run train fp16 1
fp16_scaler() {  # step 5 skipped at scale 65536; step 6 at 32768
  grep -E '^step +5 .*scale 65536 \(skipped\)' "$out/fp16_run.log" && grep -E '^step +6 .*scale 32768 ' "$out/fp16_run.log"
}
check fp16_scaler fp16_scaler
check fused_kernels "$bin/trainer_test"

# --- throughput ---------------------------------------------------------------------------
bench_args=()
[ "$device" = cuda ] && bench_args=(--device cuda)
check bench "$python" tests/bench/train_bench.py "$bin" --quick "${bench_args[@]}"
grep -E 'peak|tok/s' "$out/bench.log" | tee -a "$out/summary.txt" || true

say "done in $((SECONDS - t0)) s: $([ $fail = 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit $fail
