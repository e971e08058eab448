#!/usr/bin/python3
"""Throughput benchmark (label bench): sweep-train vs the PyTorch eager reference of the
same model, batch and thread count, side by side in one run. Prints tokens/s of each,
their ratio, model FLOP/s as a fraction of the one-thread sgemm peak measured in this
run, and sweep-train's recording overhead (checksums + record writes) as a fraction of
step time.

Usage: train_bench.py BIN_DIR [--quick] [--device cuda]
  --quick: one round of fewer steps; --device cuda: both programs on the GPU, and the
  peak is the GPU's fp32 matmul (TF32 off) instead of the one-thread sgemm.

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

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
THREADS = 1
# torch.set_num_threads does not limit the OpenBLAS that Debian's PyTorch calls: set its
# pool before torch loads it, or the "one-thread" peak uses every core.
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402

try:
    import h5py  # noqa: E402
except ImportError:  # a GPU machine with PyTorch but no h5py: read sweep-train's log instead
    h5py = None

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
    """fp32 matmul FLOP/s: one CPU thread, or the GPU (TF32 off) with --device cuda."""
    torch.set_num_threads(threads)
    if DEVICE != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = False
        n = 8192
    a, b = torch.randn(n, n, device=DEVICE), torch.randn(n, n, device=DEVICE)
    times = []
    for i in range(3 + reps):
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        t = time.perf_counter()
        a @ b
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def run_sweep_train(name, cfg, tmp, checksum_every, round_no=0):
    layers, d, heads, vocab, seq, mb, accum, steps, warm = cfg
    path = os.path.join(tmp, f"{name}{checksum_every}.yaml")
    with open(path, "w") as f:
        f.write(f"model: {{layers: {layers}, d_model: {d}, heads: {heads}, vocab: {vocab}, seq_len: {seq}}}\n")
        f.write(f"train: {{steps: {steps}, micro_batch: {mb}, accum: {accum}, lr: 1.0e-3, clip_norm: 1.0,"
                f" threads: {THREADS}, checksum_every: {checksum_every}, log_every: 1}}\n")
    out = os.path.join(tmp, f"{name}-run{checksum_every}-{round_no}")
    argv = [os.path.join(BIN, "sweep-train"), "--config", path, "--out", out, "--device", DEVICE]
    if h5py is None:
        # Without h5py: tokens/s from the per-step log lines; no recording overhead.
        log = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
        tps = [float(line.split("tok/s")[1]) for line in log.splitlines() if line.startswith("step ")]
        return statistics.median(tps[warm:]), float("nan"), "(h5py missing: not read)"
    subprocess.run(argv + ["--quiet"], check=True)
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
                          *map(str, (layers, d, heads, vocab, seq, mb, accum, steps, warm, THREADS)), DEVICE],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["tokens_per_s"]


# This machine's speed drifts by 10-30% from minute to minute (other tenants), so each
# figure is the median over rounds, and a round runs the peak, sweep-train and PyTorch
# back to back: the ratio and MFU compare programs that ran under the same conditions.
ROUNDS = 1 if QUICK else 3
peaks, results = [], {name: {"cpp": [], "ref": [], "overhead": []} for name in CONFIGS}
blas = ""
with tempfile.TemporaryDirectory() as tmp:
    for round_no in range(ROUNDS):
        peaks.append(sgemm_peak(THREADS))
        for name, cfg in CONFIGS.items():
            cpp, overhead, blas = run_sweep_train(name, cfg, tmp, 1, round_no)
            r = results[name]
            r["cpp"].append(cpp)
            r["overhead"].append(overhead)
            r["ref"].append(run_reference(cfg))
peak = statistics.median(peaks)
what = f"{THREADS} thread, 1024^3, PyTorch/OpenBLAS" if DEVICE == "cpu" else "GPU, 8192^3 fp32, TF32 off"
print(f"sgemm peak ({what}): {peak / 1e9:.1f} GFLOP/s "
      f"(median of {ROUNDS}: {', '.join(f'{p / 1e9:.1f}' for p in peaks)})")
for name, cfg in CONFIGS.items():
    r = results[name]
    cpp, ref, overhead = (statistics.median(r[k]) for k in ("cpp", "ref", "overhead"))
    fpt = model_flops_per_token(*cfg[:5])
    rounds = ", ".join(f"{c / f:.2f}" for c, f in zip(r["cpp"], r["ref"]))
    # MFU per round, against the peak measured in that round; then the median.
    mfu_cpp = statistics.median(c * fpt / p for c, p in zip(r["cpp"], peaks))
    mfu_ref = statistics.median(f * fpt / p for f, p in zip(r["ref"], peaks))
    print(f"{name:6s} sweep-train {cpp:10.0f} tok/s  pytorch {ref:10.0f} tok/s  ratio {cpp / ref:5.2f}x "
          f"(per round: {rounds})  MFU sweep-train {mfu_cpp:6.1%}  pytorch {mfu_ref:6.1%}  "
          f"recording overhead {overhead:6.2%} (checksum_every 1)")
print(f"BLAS: {blas}")
