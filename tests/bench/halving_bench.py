#!/usr/bin/python3
"""Halving quality (issue 16), a benchmark, not a test: on the 27-point lr x warmup x
clip-norm grid of sweeps/halving-search.yaml (real sweep-train runs on the synthetic
data), `search.kind: halving` against the full grid, for several model seeds
(train.seed). For each: the best objective halving found (a run it trained to the end)
over the full grid's best, and the training steps halving spent (every run's last
recorded step: a promoted run resumes, so a step is never trained twice) over the grid's.
Steps are counted from the records with h5py, not from sweep's own figures.

Exits 1 when, for some seed, halving's best is more than 2% above the grid's or it spent
more than 40% of the grid's steps.

Usage: halving_bench.py BIN_DIR [--seeds 3] [--eta 3] [--min-steps 16]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py  # Debian's python3-h5py

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = os.path.join(HERE, "..", "..", "sweeps", "halving-search.yaml")


def grid_text(seed, search):
    with open(GRID) as f:
        text = f.read()
    text = text.replace("    steps: 150\n", f"    steps: 150\n    seed: {seed}\n")
    head, _, _ = text.partition("search:\n")
    return head + (search + "launch: {parallel: 2}\n" if search else "launch: {parallel: 2}\n")


def run(bin_dir, text, tmp, name):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(tmp, name)
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(bin_dir, "sweep"), "run", path, "--out", out, "--quiet", "--report-every", "0"],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode not in (0, 1):
        sys.exit(f"halving_bench: sweep run {name} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    rep = subprocess.run([os.path.join(bin_dir, "sweep"), "report", out, "--format", "json", "-o", "-"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(rep.stdout)
    best = min((r["objective"] for r in doc["runs"] if r["status"] == "completed" and r["objective"] is not None),
               default=float("inf"))
    steps = 0
    for rec in glob.glob(os.path.join(out, "runs", "*", "record.h5")):
        with h5py.File(rec, "r") as f:
            steps += int(f["metrics"]["step"][-1])
    return best, steps, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--eta", type=int, default=3)
    ap.add_argument("--min-steps", type=int, default=16)
    a = ap.parse_args()
    search = f"search:\n  kind: halving\n  min_steps: {a.min_steps}\n  eta: {a.eta}\n  metric: train_loss_end\n"
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.seeds):
            g_best, g_steps, g_wall = run(a.bin_dir, grid_text(seed, ""), tmp, f"grid-{seed}")
            h_best, h_steps, h_wall = run(a.bin_dir, grid_text(seed, search), tmp, f"halving-{seed}")
            ratio, share = h_best / g_best, h_steps / g_steps
            good = ratio <= 1.02 and share <= 0.40
            ok &= good
            print(f"train.seed {seed}: grid best {g_best:.5f} ({g_steps} steps, {g_wall:.1f} s), halving best "
                  f"{h_best:.5f} ({h_steps} steps, {h_wall:.1f} s): best ratio {ratio:.4f}, steps {100 * share:.1f}%"
                  f"{'' if good else '  MISSED'}")
    print("halving_bench: " + ("within 2% of the grid's best with at most 40% of its steps for every seed" if ok else
                               "missed the target"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
