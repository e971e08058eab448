#!/usr/bin/python3
"""Whole training step, canonical vs native reduction (issue 4): the same W=2 run of the
`small` model under mpiexec, once with dist.reduction canonical and once native, repeated
in interleaved rounds (the order alternates between rounds). Target: canonical / native
median step time <= 1.05; exits 1 when it is missed.

Usage: step_reduction_bench.py BIN_DIR [--rounds N] [--quick]
  --rounds N: rounds (default 5); --quick: 1 round of 8 steps, a smoke run whose ratio is
  printed but not judged (exit 0 unless a run fails).

How it is timed (the same for both sides, which are the same program): a run's figure is
the median over its steps after the first WARM of /metrics/step_time_s in its record
(sweep-train's wall time of each step, the slowest rank's; the reduction is inside it).
Each side's figure is the median over rounds of its runs' figures. The ratio is the median
over rounds of each round's canonical / native (the two runs of a round ran back to back),
judged against the target; the per-round ratios are printed for the spread.
"""
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
STEPS = 8 if QUICK else 20
WARM = 3
TARGET = 1.05


def run(tmp, reduction, round_no):
    cfg = os.path.join(tmp, reduction + ".yaml")
    with open(cfg, "w") as f:
        f.write("model: {layers: 4, d_model: 256, heads: 4, vocab: 256, seq_len: 128}\n"
                f"train: {{steps: {STEPS}, micro_batch: 8, accum: 1, lr: 1.0e-3, clip_norm: 1.0}}\n"
                f"dist: {{world_size: 2, reduction: {reduction}}}\n")
    out = os.path.join(tmp, f"{reduction}-{round_no}")
    argv = ["mpiexec", "-n", "2"]
    if os.geteuid() == 0:
        argv.insert(1, "--allow-run-as-root")
    subprocess.run(argv + [os.path.join(BIN, "sweep-train"), "--config", cfg, "--out", out, "--quiet"], check=True)
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        return statistics.median(f["metrics/step_time_s"][WARM:]), dict(f["summary"].attrs)


times = {"canonical": [], "native": []}
summary = {}
with tempfile.TemporaryDirectory() as tmp:
    for round_no in range(ROUNDS):
        for reduction in (("canonical", "native") if round_no % 2 == 0 else ("native", "canonical")):
            t, attrs = run(tmp, reduction, round_no)
            times[reduction].append(t)
            if reduction == "canonical":
                summary = attrs
canonical, native = statistics.median(times["canonical"]), statistics.median(times["native"])
ratios = [c / n for c, n in zip(times["canonical"], times["native"])]
ratio = statistics.median(ratios)
per_round = ", ".join(f"{x:.3f}" for x in ratios)
if QUICK:
    verdict, missed = f"(target <= {TARGET}: not judged, --quick)", False
else:
    missed = ratio > TARGET
    verdict = f"(target <= {TARGET}: {'MISSED' if missed else 'met'})"
print(f"W=2 small model, {ROUNDS} interleaved round(s) of {STEPS} steps; a run's figure is its median step time "
      f"after {WARM} (slowest rank); medians over rounds:")
print(f"canonical {canonical * 1e3:.1f} ms, native {native * 1e3:.1f} ms, canonical / native {ratio:.3f}x {verdict} "
      f"(per round: {per_round})")
print("self-test at start of a canonical run (gradient size {} bytes): canonical busbw {} GB/s, native busbw {} GB/s"
      .format(summary.get("comm.bytes"), summary.get("comm.canonical.busbw_GBps"), summary.get("comm.native.busbw_GBps")))
sys.exit(1 if missed else 0)
