#!/usr/bin/python3
"""Population-based training against random search (issue 58), a benchmark, not a test:
the same space (train.lr log-uniform, train.clip_norm a choice) over the quickstart's
model on the synthetic data with a cosine schedule, searched by `search.kind: pbt`
(population 8, a decision every `interval` steps by the held-out loss) and by
`search.kind: random` (8 draws trained to the end), at equal total training steps: a pbt
fork starts from its parent's checkpoint, so the steps it trains are its last step less
its fork step, and the population trains 8 x train.steps in all, as the 8 random runs do.

The figure is each search's best held-out loss at the end (final_eval_loss of the best
member or run; both select on the same held-out rows), per search seed (the search seed
and train.seed both), read from `sweep report --format json`; steps are counted from the
same report (each run's last step, less its lineage's parent step for a fork).

Prints one line per seed and the summary; exits 1 when pbt's best is worse than random's
in more than half of the seeds, or it spent more steps than random (two members that
exploit the same member with the same keys share one run, so pbt may spend fewer).

Usage: pbt_bench.py BIN_DIR [--seeds 5] [--steps 160] [--interval 20] [--population 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def grid_text(kind, seed, steps, interval, population):
    head = f"""name: pbt-bench-{kind}-{seed}
base:
  model: {{layers: 2, d_model: 64, heads: 4, vocab: 256, seq_len: 32}}
  data: {{kind: synthetic, seed: 0, branching: 4, eval_fraction: 0.1}}
  train:
    steps: {steps}
    seed: {seed}
    micro_batch: 8
    schedule: cosine
    warmup: 10
    min_lr: 3.0e-5
    threads: 1
    log_every: 1000
    eval_every: {interval}
    eval_batches: 4
    checkpoint_every: {interval}
    keep_checkpoints: {steps // interval}
search:
  seed: {seed}
  space:
    train.lr: {{loguniform: [3.0e-4, 1.0e-1]}}
    train.clip_norm: {{choice: [0.25, 0.5, 1.0, 2.0, 4.0]}}
"""
    if kind == "pbt":
        head += (f"  kind: pbt\n  population: {population}\n  interval: {interval}\n  quantile: 0.25\n"
                 "  perturb: [0.8, 1.2]\n  resample: 0.25\n  metric: final_eval_loss\n")
    else:
        head += f"  kind: random\n  samples: {population}\n"
    return head + "launch: {parallel: 2}\n"


def run(bin_dir, text, tmp, name):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(tmp, name)
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(bin_dir, "sweep"), "run", path, "--out", out, "--quiet", "--report-every", "0"],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    # Exit 1 with every run there: some diverged (a search counts them failed and goes on).
    log = os.path.join(out, "search.log")
    done = not name.startswith("pbt") or (os.path.exists(log) and open(log).read().endswith("done\n"))
    if p.returncode not in (0, 1) or not done:
        sys.exit(f"pbt_bench: sweep run {name} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    rep = subprocess.run([os.path.join(bin_dir, "sweep"), "report", out, "--format", "json", "-o", "-"],
                         capture_output=True, text=True, check=True)
    runs = json.loads(rep.stdout)["runs"]
    best = min((r["final_eval_loss"] for r in runs
                if r["status"] == "completed" and r["final_eval_loss"] is not None), default=float("inf"))
    steps = sum(r["steps"] - ((r["lineage"] or {}).get("parent_step") or 0) for r in runs)
    forks = sum(1 for r in runs if (r["lineage"] or {}).get("kind") == "forked")
    return best, steps, forks, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--interval", type=int, default=20)
    ap.add_argument("--population", type=int, default=8)
    a = ap.parse_args()
    wins, ratios, within_budget = 0, [], True
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.seeds):
            res = {}
            for kind in ("random", "pbt"):
                res[kind] = run(a.bin_dir, grid_text(kind, seed, a.steps, a.interval, a.population), tmp,
                                f"{kind}-{seed}")
            (r_best, r_steps, _, r_wall), (p_best, p_steps, p_forks, p_wall) = res["random"], res["pbt"]
            wins += p_best < r_best
            ratios.append(p_best / r_best)
            within_budget &= p_steps <= r_steps
            print(f"seed {seed}: random best {r_best:.5f} ({r_steps} steps, {r_wall:.1f} s), pbt best {p_best:.5f} "
                  f"({p_steps} steps, {p_forks} forks, {p_wall:.1f} s): ratio {p_best / r_best:.4f}")
    ok = 2 * wins > a.seeds and within_budget
    print(f"pbt_bench: pbt better in {wins} of {a.seeds} seeds, median ratio {statistics.median(ratios):.4f}"
          f"{'' if within_budget else ', MORE STEPS THAN RANDOM'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
