#!/usr/bin/python3
"""Asynchronous against synchronous halving (issue 58), a benchmark, not a test: the
27-point lr x warmup x clip-norm grid of sweeps/halving-search.yaml (real sweep-train runs
on the synthetic data) as `search.kind: halving` and as `search.kind: asha`, with the same
min_steps and eta, at each launch.parallel asked for, one run after the other on this
machine. For each: the wall time of `sweep run` (timed here), when the first run trained
to the full budget finished (its "completed" line, timed here), how busy its workers were
(sweep's own line: the attempts' summed wall time over parallel x wall), the training
steps spent (every run's last recorded step, read with h5py: a promoted run resumes, so
no step is trained twice), and the best objective of a run trained to the end (sweep
report's JSON).

Each search runs twice at each parallel, in two directories, and the two search.log files
must be equal (asha's decisions do not depend on timing); the benchmark exits 1 otherwise.

Usage: asha_bench.py BIN_DIR [--parallel 2 4] [--min-steps 16] [--eta 3] [--seed 0]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import h5py  # Debian's python3-h5py

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = os.path.join(HERE, "..", "..", "sweeps", "halving-search.yaml")


def grid_text(kind, parallel, seed, min_steps, eta):
    with open(GRID) as f:
        text = f.read()
    text = text.replace("    steps: 150\n", f"    steps: 150\n    seed: {seed}\n")
    head, _, _ = text.partition("search:\n")
    return (head + f"search:\n  kind: {kind}\n  min_steps: {min_steps}\n  eta: {eta}\n  metric: train_loss_end\n"
            f"launch: {{parallel: {parallel}, slots: {parallel}}}\n")


def run(bin_dir, text, tmp, name):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(tmp, name)
    # Not --quiet: the driver's "completed" lines, timed here as they come, say when the
    # first run trained to the full budget finished.
    t0 = time.monotonic()
    first_full = None
    lines = []
    with subprocess.Popen([os.path.join(bin_dir, "sweep"), "run", path, "--out", out, "--report-every", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            lines.append(line)
            if first_full is None and line.startswith("completed "):
                first_full = time.monotonic() - t0
    wall = time.monotonic() - t0
    stdout = "".join(lines)
    if proc.returncode != 0:
        sys.exit(f"asha_bench: sweep run {name} failed ({proc.returncode}):\n{stdout}")
    busy = re.search(r"busy (\d+)% of", stdout)
    rep = subprocess.run([os.path.join(bin_dir, "sweep"), "report", out, "--format", "json", "-o", "-"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(rep.stdout)
    best = min((r["objective"] for r in doc["runs"] if r["status"] == "completed" and r["objective"] is not None),
               default=float("inf"))
    steps = 0
    for rec in glob.glob(os.path.join(out, "runs", "*", "record.h5")):
        with h5py.File(rec, "r") as f:
            steps += int(f["metrics"]["step"][-1])
    with open(os.path.join(out, "search.log")) as f:
        log = f.read()
    return {"wall": wall, "first": first_full if first_full is not None else float("nan"),
            "busy": int(busy.group(1)) if busy else -1, "steps": steps, "best": best, "log": log}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--parallel", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--min-steps", type=int, default=16)
    ap.add_argument("--eta", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ok = True
    print("| parallel | search | wall | first full-budget run done | workers busy | steps trained | best objective "
          "| same search.log twice |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="asha_bench_") as tmp:
        for parallel in a.parallel:
            for kind in ("halving", "asha"):
                text = grid_text(kind, parallel, a.seed, a.min_steps, a.eta)
                first = run(a.bin_dir, text, tmp, f"{kind}-p{parallel}-a")
                second = run(a.bin_dir, text, tmp, f"{kind}-p{parallel}-b")
                same = first["log"] == second["log"]
                ok &= same
                for r in (first, second):
                    print(f"| {parallel} | {kind} | {r['wall']:.1f} s | {r['first']:.1f} s | {r['busy']}% | {r['steps']} | "
                          f"{r['best']:.5f} | {'yes' if same else 'NO'} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
