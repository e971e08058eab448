#!/usr/bin/python3
"""Micro-batch invariance's cost (train.leaf): sweep-train's step time with leaf 1 against
the same run without a leaf, side by side in one run, at the small config (4 layers,
d_model 256, seq_len 128, micro-batch 8, vocab 256, one thread), plus what each run's
rank held at its peak (the record's /ranks/peak_rss_bytes and step_peak_bytes).

Usage: leaf_bench.py BIN_DIR [--rounds N] [--quick]
  --rounds N: rounds (default 3), each runs both programs, alternating which goes first.
  --quick: one round of fewer steps; the figures are printed, the target is not judged.
Exit status: 0, or 1 when the median ratio misses the target (leaf 1 <= 1.2x the step
time without a leaf).

Timing: the one method of the whole-run benchmarks (step_lines.py): each "step N" line is
stamped as it is read, and a run's step time is (stamp of the last step - stamp of the
last warm-up step) / the steps between; startup, warm-up and teardown are outside it.
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_lines import step_line_times  # noqa: E402

try:
    import h5py
except ImportError:
    h5py = None

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else (1 if QUICK else 3)
STEPS, WARM = (6, 2) if QUICK else (20, 4)
TARGET = 1.2


def run(name, leaf, tmp, round_no):
    path = os.path.join(tmp, f"{name}.yaml")
    with open(path, "w") as f:
        f.write("model: {layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128}\n")
        f.write(f"train: {{steps: {STEPS}, micro_batch: 8, accum: 1, lr: 1.0e-3, clip_norm: 1.0, threads: 1,"
                f" checksum_every: 1, log_every: 1{', leaf: %d' % leaf if leaf else ''}}}\n")
    out = os.path.join(tmp, f"{name}-{round_no}")
    stamps = step_line_times([os.path.join(BIN, "sweep-train"), "--config", path, "--out", out])
    step_s = (stamps[STEPS] - stamps[WARM]) / (STEPS - WARM)
    peak = step_peak = float("nan")
    if h5py is not None:
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            peak = float(f["ranks/peak_rss_bytes"][0]) if "ranks/peak_rss_bytes" in f else float("nan")
            step_peak = float(f["ranks/step_peak_bytes"][0]) if "ranks/step_peak_bytes" in f else float("nan")
    return step_s, peak, step_peak


def main():
    os.environ.pop("OPENBLAS_CORETYPE", None)
    ratios, rows = [], []
    with tempfile.TemporaryDirectory(prefix="leaf_bench_") as tmp:
        for r in range(ROUNDS):
            order = [("plain", 0), ("leaf1", 1)] if r % 2 == 0 else [("leaf1", 1), ("plain", 0)]
            got = {name: run(name, leaf, tmp, r) for name, leaf in order}
            ratio = got["leaf1"][0] / got["plain"][0]
            ratios.append(ratio)
            rows.append(got)
            print(f"round {r + 1}: step {got['plain'][0] * 1000:.0f} ms without a leaf, "
                  f"{got['leaf1'][0] * 1000:.0f} ms with leaf 1: ratio {ratio:.3f}", flush=True)
    med = statistics.median(ratios)
    mib = 1 << 20
    last = rows[-1]
    print(f"peak resident: {last['plain'][1] / mib:.0f} MiB without a leaf, {last['leaf1'][1] / mib:.0f} MiB with "
          f"leaf 1; tensors at the step's peak: {last['plain'][2] / mib:.0f} MiB, {last['leaf1'][2] / mib:.0f} MiB")
    ok = med <= TARGET
    print(f"leaf 1 vs no leaf, step time: median ratio {med:.3f} over {ROUNDS} round(s) (target <= {TARGET}): "
          + ("not judged (--quick)" if QUICK else "ok" if ok else "MISSED"))
    return 0 if QUICK or ok else 1


if __name__ == "__main__":
    sys.exit(main())
