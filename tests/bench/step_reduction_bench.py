#!/usr/bin/python3
"""Whole training step, canonical vs native reduction (issue 4): the same W=2 run of the
`small` model trained twice under mpirun, once with dist.reduction canonical and once
native; prints the median step time of each (from the records' /metrics/step_time_s,
which is the slowest rank's time) and their ratio. Target: canonical / native <= 1.05.

Usage: step_reduction_bench.py BIN_DIR [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

BIN = sys.argv[1]
STEPS = 8 if "--quick" in sys.argv else 30
WARM = 3


def run(tmp, reduction):
    cfg = os.path.join(tmp, reduction + ".yaml")
    with open(cfg, "w") as f:
        f.write("model: {layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128}\n"
                f"train: {{steps: {STEPS}, micro_batch: 8, accum: 1, lr: 1.0e-3, clip_norm: 1.0}}\n"
                f"dist: {{world_size: 2, reduction: {reduction}}}\n")
    out = os.path.join(tmp, reduction)
    argv = ["mpiexec", "-n", "2"]
    if os.geteuid() == 0:
        argv.insert(1, "--allow-run-as-root")
    subprocess.run(argv + [os.path.join(BIN, "sweep-train"), "--config", cfg, "--out", out, "--quiet"], check=True)
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        return statistics.median(f["metrics/step_time_s"][WARM:]), dict(f["summary"].attrs)


with tempfile.TemporaryDirectory() as tmp:
    canonical, summary = run(tmp, "canonical")
    native, _ = run(tmp, "native")
print(f"W=2 small model, {STEPS} steps: step time canonical {canonical * 1e3:.1f} ms, native {native * 1e3:.1f} ms, "
      f"ratio {canonical / native:.3f}x (target <= 1.05)")
print("self-test at start (gradient size {} bytes): canonical busbw {} GB/s, native busbw {} GB/s".format(
    summary.get("comm.bytes"), summary.get("comm.canonical.busbw_GBps"), summary.get("comm.native.busbw_GBps")))
