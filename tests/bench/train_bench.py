#!/usr/bin/python3
"""Throughput benchmark (label bench): sweep-train vs the PyTorch eager reference of the
same model, batch and thread count, side by side in one run. Prints tokens/s of each,
their ratio, model FLOP/s as a fraction of the one-thread sgemm peak measured in this
run, and sweep-train's recording overhead (checksums + record writes) as a fraction of
step time.

Usage: train_bench.py BIN_DIR [--quick]

Model FLOPs per token (one formula, used for both programs): 6 x (matmul parameters:
every weight except the embedding and the norm gains) + 12 x layers x seq_len x d_model
for the attention scores and their weighted sums (forward + backward).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import h5py
import torch

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
THREADS = 1

CONFIGS = {
    # name: (layers, d_model, heads, vocab, seq, micro_batch, accum, steps, warmup)
    "tiny": (2, 64, 4, 256, 32, 4, 1, 300 if not QUICK else 40, 20),
    "small": (4, 256, 4, 256, 128, 8, 1, 40 if not QUICK else 8, 5),
}


def model_flops_per_token(layers, d, heads, vocab, seq):
    hidden = (4 * d * 2 // 3 + 7) // 8 * 8
    matmul_params = layers * (4 * d * d + 3 * d * hidden) + vocab * d
    return 6 * matmul_params + 12 * layers * seq * d


def sgemm_peak(threads, n=1024, reps=20):
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def run_sweep_train(name, cfg, tmp, checksum_every):
    layers, d, heads, vocab, seq, mb, accum, steps, warm = cfg
    path = os.path.join(tmp, f"{name}{checksum_every}.yaml")
    with open(path, "w") as f:
        f.write(f"model: {{layers: {layers}, d_model: {d}, heads: {heads}, vocab: {vocab}, seq_len: {seq}}}\n")
        f.write(f"train: {{steps: {steps}, micro_batch: {mb}, accum: {accum}, lr: 1.0e-3, clip_norm: 1.0,"
                f" threads: {THREADS}, checksum_every: {checksum_every}}}\n")
    out = os.path.join(tmp, f"{name}-run{checksum_every}")
    subprocess.run([os.path.join(BIN, "sweep-train"), "--config", path, "--out", out, "--quiet"], check=True)
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        step_t = f["metrics/step_time_s"][warm:]
        rec_t = f["metrics/record_time_s"][warm:]
        tokens = f["metrics/tokens"][0]
        blas = f["environment"].attrs["blas"]
    return tokens * len(step_t) / step_t.sum(), rec_t.sum() / step_t.sum(), blas


def run_reference(cfg):
    layers, d, heads, vocab, seq, mb, accum, steps, warm = cfg
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(["/usr/bin/python3", os.path.join(here, "reference_trainer.py"),
                          *map(str, (layers, d, heads, vocab, seq, mb, accum, steps, warm, THREADS))],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["tokens_per_s"]


peak = sgemm_peak(THREADS)
print(f"sgemm peak ({THREADS} thread, 1024^3, PyTorch/OpenBLAS): {peak / 1e9:.1f} GFLOP/s")
with tempfile.TemporaryDirectory() as tmp:
    for name, cfg in CONFIGS.items():
        cpp, overhead, blas = run_sweep_train(name, cfg, tmp, 1)
        ref = run_reference(cfg)
        fpt = model_flops_per_token(*cfg[:5])
        print(f"{name:6s} sweep-train {cpp:10.0f} tok/s  pytorch {ref:10.0f} tok/s  ratio {cpp / ref:5.2f}x  "
              f"MFU sweep-train {cpp * fpt / peak:6.1%}  pytorch {ref * fpt / peak:6.1%}  "
              f"recording overhead {overhead:6.2%} (checksum_every 1)")
    print(f"BLAS: {blas}")
