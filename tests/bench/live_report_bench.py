#!/usr/bin/python3
"""What the live report costs a sweep (issue 18): the same 100-run sweep, run by
`sweep run` with live rewrites off (--report-every 0) and on (--report-every S), side by
side, alternating, each into a fresh directory. Both are timed the same way: wall clock
around the whole `sweep run` process (time.perf_counter). Prints each sweep's wall time,
the number of live rewrites it made (lines of report.log), and the median overhead of
each interval over the rounds; exits 1 when the overhead at the default interval (30 s)
is 1% or more.

Usage: live_report_bench.py BIN_DIR [--runs N] [--steps K] [--rounds R] [--intervals A,B]
  defaults: 100 runs of 300 steps of the tiny model, 2 rounds, intervals 30 (the default)
  and 5 (six times as often, reported, not judged), 2 runs at a time.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def grid(runs, steps):
    lrs = ", ".join("%.6g" % (1e-3 * (1 + i / runs)) for i in range(runs))
    return (
        "name: live-bench\n"
        "base:\n"
        "  model: {layers: 2, d_model: 64, heads: 4, vocab: 256, seq_len: 32}\n"
        "  data: {kind: synthetic, seed: 0, branching: 4}\n"
        f"  train: {{steps: {steps}, micro_batch: 4, threads: 1, log_every: 100}}\n"
        f"grid:\n  train.lr: [{lrs}]\n"
        "launch: {parallel: 2, slots: 2}\n"
    )


def sweep(bin_dir, grid_path, out, every):
    t0 = time.perf_counter()
    subprocess.run([os.path.join(bin_dir, "sweep"), "run", grid_path, "--out", out, "--quiet",
                    "--report-every", str(every)], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    log = os.path.join(out, "report.log")
    rewrites = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    return wall, rewrites


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--intervals", default="30,5")
    a = ap.parse_args()
    intervals = [float(x) for x in a.intervals.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        g = os.path.join(tmp, "grid.yaml")
        with open(g, "w") as f:
            f.write(grid(a.runs, a.steps))
        over = {s: [] for s in intervals}
        for r in range(a.rounds):
            base, _ = sweep(a.bin_dir, g, os.path.join(tmp, f"off{r}"), 0)
            print(f"round {r}: --report-every 0: {base:.2f} s")
            for s in intervals:
                wall, n = sweep(a.bin_dir, g, os.path.join(tmp, f"on{r}_{s:g}"), s)
                over[s].append(wall / base - 1)
                print(f"round {r}: --report-every {s:g}: {wall:.2f} s, {n} live rewrites, "
                      f"overhead {100 * (wall / base - 1):+.2f}%")
        failed = False
        for s in intervals:
            m = statistics.median(over[s])
            judged = s == 30
            verdict = ("ok" if m < 0.01 else "OVER TARGET") if judged else "(not judged)"
            failed |= judged and m >= 0.01
            print(f"median overhead at --report-every {s:g}: {100 * m:+.2f}%"
                  + ("  (target < 1%)" if judged else "") + f"  {verdict}")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
