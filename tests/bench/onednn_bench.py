#!/usr/bin/python3
"""What turning oneDNN off costs (SWEEP_ONEDNN=0: bits that follow the pinned OpenBLAS
kernel on any CPU, even in bf16), a benchmark, not a test: the same bf16 and fp32 runs of
the small decoder (4 layers, d_model 256, seq 128, micro-batch 8, 40 steps) with oneDNN
on (the default) and off, alternating, each into a fresh directory, timed the same way.
Prints the median tokens/s (from the records, h5py) per setting, the ratio, and whether
the two settings trained the same bits. Informational: exits 0 unless a run fails.

Usage: onednn_bench.py BIN_DIR [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import h5py  # Debian's python3-h5py

CONFIG = """model: {{kind: decoder, layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128}}
data: {{kind: synthetic, seed: 0, branching: 4}}
train: {{steps: 40, micro_batch: 8, lr: 1.0e-3, precision: {precision}, threads: 1, log_every: 1000}}
"""


def run(bin_dir, tmp, precision, onednn, k):
    cfg = os.path.join(tmp, f"{precision}.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(precision=precision))
    out = os.path.join(tmp, f"{precision}-{onednn}-{k}")
    env = {k: v for k, v in os.environ.items() if k not in ("SWEEP_ONEDNN", "OPENBLAS_CORETYPE")}
    env["OPENBLAS_CORETYPE"] = "Haswell"  # one kernel for both settings
    if not onednn:
        env["SWEEP_ONEDNN"] = "0"
    p = subprocess.run([os.path.join(bin_dir, "sweep-train"), "--config", cfg, "--out", out, "--quiet"], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"onednn_bench: {precision} onednn={onednn} failed ({p.returncode}): {p.stderr}")
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        tps = statistics.median(f["metrics"]["tokens_per_s"][5:])
        loss = f["metrics"]["loss"][-1]
        said = f["environment"].attrs["onednn"]
    return tps, loss, said


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for precision in ("bf16", "fp32"):
            tps = {False: [], True: []}
            loss, said = {}, ""
            for k in range(a.rounds):
                for onednn in (False, True):
                    t, l, s = run(a.bin_dir, tmp, precision, onednn, k)
                    said = s if not onednn else said
                    tps[onednn].append(t)
                    loss[onednn] = l
            off, on = statistics.median(tps[False]), statistics.median(tps[True])
            same = "same bits" if loss[False] == loss[True] else "other bits"
            print(f"{precision}: oneDNN off {off:.0f} tokens/s, on {on:.0f} tokens/s: off/on {off / on:.3f} ({same}; "
                  f"record says '{said}' for off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
