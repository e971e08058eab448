#!/usr/bin/python3
"""The seam costs nothing (issue 14): the small decoder trained by two programs side by side
in one run, step time of each, their ratio; exit 1 when the second is more than 2% slower.

Usage: api_bench.py BEFORE AFTER [--rounds N] [--quick]
  BEFORE, AFTER: training programs (sweep-train of two builds, or any sweep::train_main
  program: e.g. examples/own-model's gpt2-train, which offers the built-in decoder through
  the installed package). The issue's measurement: BEFORE = sweep-train built at cdb9dd0
  (before the model registry), AFTER = this build's gpt2-train and sweep-train.
  --rounds N: rounds (default 5). --quick: one short round; figures printed, not judged.
Exit status: 0, or 1 when AFTER's step time is more than 1.02x BEFORE's (judged runs).

Timing: train_bench.py's one method (step_lines.py): each program prints "step N" when
step N is done, the script stamps the lines as they arrive; the time per step is the wall
time from the warm-up's last step line to the last step's line over the steps between.
Both programs run the same config (the small decoder of train_bench.py: 4 layers, d_model
256, 4 heads, seq 128, micro-batch 8, one thread, checksums every step), one after the
other, the order alternating between rounds; the reported ratio is the median over rounds
of each round's ratio, so the two figures of a round ran under the same conditions.
"""
import os
import statistics
import sys
import tempfile

from step_lines import positional_args, seconds_per_step  # tests/bench/step_lines.py

QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
STEPS, WARM = (8, 3) if QUICK else (40, 5)
TARGET = 1.02
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"

CONFIG = (
    "model: {layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128}\n"
    f"train: {{steps: {STEPS}, micro_batch: 8, lr: 1.0e-3, clip_norm: 1.0, threads: 1, checksum_every: 1,"
    " log_every: 1}\n"
)


def step_time(program, config, out):
    return seconds_per_step(program, config, out, WARM, STEPS)


def main():
    args = positional_args(sys.argv[1:])
    if len(args) != 2:
        sys.exit(__doc__)
    before, after = args
    ratios, times = [], {before: [], after: []}
    with tempfile.TemporaryDirectory(prefix="api_bench_") as tmp:
        config = os.path.join(tmp, "small.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        for r in range(ROUNDS):
            order = (before, after) if r % 2 == 0 else (after, before)
            got = {p: step_time(p, config, os.path.join(tmp, f"{r}-{i}")) for i, p in enumerate(order)}
            for p in got:
                times[p].append(got[p])
            ratios.append(got[after] / got[before])
            print(f"round {r + 1}: before {got[before] * 1e3:.2f} ms/step, after {got[after] * 1e3:.2f} ms/step,"
                  f" after/before {ratios[-1]:.4f}", flush=True)
    ratio = statistics.median(ratios)
    print(f"before: {before}: median {statistics.median(times[before]) * 1e3:.2f} ms/step")
    print(f"after:  {after}: median {statistics.median(times[after]) * 1e3:.2f} ms/step")
    if QUICK:
        print(f"after/before step time: {ratio:.4f} (target <= {TARGET}: not judged)")
        return 0
    met = ratio <= TARGET
    print(f"after/before step time: {ratio:.4f} (target <= {TARGET}: {'met' if met else 'MISSED'})")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
