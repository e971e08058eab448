#!/usr/bin/python3
"""What gradient telemetry costs (issue 40): the small decoder trained by sweep-train
without telemetry (BEFORE, a build before it existed) and with it (AFTER), at the default
train.telemetry_every (10: each rank's own norm every step, each tensor's norm every 10th
and the last) and with per-tensor norms every step (telemetry_every 1), reported
separately; exit 1 when the default costs more than 2% of the step.

Usage: telemetry_bench.py BEFORE AFTER [--rounds N] [--quick] [--moe]
  BEFORE: sweep-train built before gradient telemetry (e.g. at a322ca9);
  AFTER: this build's sweep-train. --rounds N: rounds (default 5); --quick: one short
  round, figures printed, not judged; --moe: the decoder with 8 routed experts (top 2).
Exit status: 0, or 1 when AFTER at the default is more than 1.02x BEFORE (judged runs).

Timing: api_bench.py's (step_lines.py): wall time per step between the warm-up's last step
line and the last one; the three runs of a round go one after the other, in an order that
rotates between rounds, and the figures are medians over rounds of each round's ratio.
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

MOE = ", moe: {experts: 8, top_k: 2}" if "--moe" in sys.argv else ""
MODEL = "model: {layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128" + MOE + "}\n"


def train_line(extra):
    return (f"train: {{steps: {STEPS}, micro_batch: 8, lr: 1.0e-3, clip_norm: 1.0, threads: 1, checksum_every: 1,"
            f" log_every: 1{extra}}}\n")


def step_time(program, config, out):
    return seconds_per_step(program, config, out, WARM, STEPS)


def main():
    args = positional_args(sys.argv[1:])
    if len(args) != 2:
        sys.exit(__doc__)
    before, after = args
    with tempfile.TemporaryDirectory(prefix="telemetry_bench_") as tmp:
        configs = {}
        for name, extra in (("default", ""), ("every", ", telemetry_every: 1")):
            configs[name] = os.path.join(tmp, name + ".yaml")
            with open(configs[name], "w") as f:
                f.write(MODEL + train_line(extra))
        sides = [("before", before, configs["default"]), ("default", after, configs["default"]),
                 ("every step", after, configs["every"])]
        ratios = {"default": [], "every step": []}
        times = {s[0]: [] for s in sides}
        for r in range(ROUNDS):
            order = sides[r % 3:] + sides[:r % 3]
            got = {name: step_time(p, c, os.path.join(tmp, f"{r}-{name}")) for name, p, c in order}
            for name in got:
                times[name].append(got[name])
            for name in ratios:
                ratios[name].append(got[name] / got["before"])
            print(f"round {r + 1}: " + ", ".join(f"{n} {got[n] * 1e3:.2f} ms/step" for n, _, _ in sides) +
                  f"; default/before {ratios['default'][-1]:.4f}, every step/before {ratios['every step'][-1]:.4f}",
                  flush=True)
    for name in times:
        print(f"{name}: median {statistics.median(times[name]) * 1e3:.2f} ms/step")
    every = statistics.median(ratios["every step"])
    print(f"per-tensor norms every step / before: {every:.4f} (reported, not judged)")
    ratio = statistics.median(ratios["default"])
    if QUICK:
        print(f"default / before step time: {ratio:.4f} (target <= {TARGET}: not judged)")
        return 0
    met = ratio <= TARGET
    print(f"default / before step time: {ratio:.4f} (target <= {TARGET}: {'met' if met else 'MISSED'})")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
