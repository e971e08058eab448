#!/usr/bin/python3
"""Search quality (issue 16), a benchmark, not a test: on an lr x warmup x clip-norm
problem over the synthetic data (real sweep-train runs), `search.kind: tpe` against
`search.kind: random` with the same number of runs, for 5 search seeds, and Optuna's
TPESampler (Debian's python3-optuna, the independent yardstick) on the same objective,
space and budget, each of its trials one real run through `sweep run`.

The objective is what a sweep ranks runs by (the mean training loss of the last 20 steps;
the runs do not evaluate held-out data). Prints one line per seed and the summary; exits
1 when tpe finds a better or equal best than random in fewer than 4 of the 5 seeds.

Usage: search_bench.py BIN_DIR [--trials N] [--startup K] [--steps S] [--seeds 5] [--no-optuna]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SPACE = {
    "train.lr": "{loguniform: [1.0e-4, 3.0e-2]}",
    "train.warmup": "{int: [0, 40], step: 10}",
    "train.clip_norm": "{uniform: [0.25, 2.0]}",
}


def base(steps):
    return ("base:\n"
            "  model: {layers: 2, d_model: 64, heads: 4, vocab: 256, seq_len: 32}\n"
            "  data: {kind: synthetic, seed: 0, branching: 4}\n"
            f"  train: {{steps: {steps}, micro_batch: 8, schedule: cosine, threads: 1, log_every: 1000}}\n")


def search_grid(kind, seed, trials, startup, steps):
    g = f"name: bench-{kind}-{seed}\n" + base(steps)
    g += f"search:\n  kind: {kind}\n  samples: {trials}\n  seed: {seed}\n"
    if kind == "tpe":
        g += f"  startup: {startup}\n  parallel: 2\n"
    g += "  space:\n" + "".join(f"    {k}: {v}\n" for k, v in SPACE.items())
    return g + "launch: {parallel: 2}\n"


def run_sweep(bin_dir, grid_text, tmp, name):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(grid_text)
    out = os.path.join(tmp, name)
    p = subprocess.run([os.path.join(bin_dir, "sweep"), "run", path, "--out", out, "--quiet", "--report-every", "0"],
                       capture_output=True, text=True)
    # Exit 1: some run failed or diverged; it counts as the worst, as in a search.
    if p.returncode not in (0, 1):
        sys.exit(f"search_bench: sweep run {name} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    rep = subprocess.run([os.path.join(bin_dir, "sweep"), "report", out, "--format", "json", "-o", "-"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(rep.stdout)
    objectives = [r["objective"] if r["status"] == "completed" else None for r in doc["runs"]]
    objectives += [None] * len([f for f in doc["failed"] if f["status"] != "diverged"])
    return [x if x is not None else float("inf") for x in objectives] or [float("inf")]


def optuna_best(bin_dir, seed, trials, startup, steps, tmp):
    import optuna  # Debian's python3-optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        lr = trial.suggest_float("lr", 1.0e-4, 3.0e-2, log=True)
        warmup = trial.suggest_int("warmup", 0, 40, step=10)
        clip = trial.suggest_float("clip", 0.25, 2.0)
        grid = (f"name: optuna-{seed}-{trial.number}\n" + base(steps)).replace(
            "schedule: cosine", f"schedule: cosine, lr: {lr!r}, warmup: {warmup}, clip_norm: {clip!r}")
        return run_sweep(bin_dir, grid, tmp, f"optuna-{seed}-{trial.number}")[0]

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup))
    study.optimize(objective, n_trials=trials)
    return study.best_value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--startup", type=int, default=8)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--no-optuna", action="store_true")
    a = ap.parse_args()
    wins, ratios = 0, []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{a.trials} runs per search ({a.startup} random startup trials for TPE), {a.steps} steps each, "
              f"space {', '.join(SPACE)}")
        for seed in range(1, a.seeds + 1):
            best_random = min(run_sweep(a.bin_dir, search_grid("random", seed, a.trials, a.startup, a.steps), tmp,
                                        f"random-{seed}"))
            best_tpe = min(run_sweep(a.bin_dir, search_grid("tpe", seed, a.trials, a.startup, a.steps), tmp,
                                     f"tpe-{seed}"))
            wins += best_tpe <= best_random
            line = f"seed {seed}: best random {best_random:.6f}  best tpe {best_tpe:.6f}"
            if not a.no_optuna:
                best_optuna = optuna_best(a.bin_dir, seed, a.trials, a.startup, a.steps, tmp)
                ratios.append(best_tpe / best_optuna)
                line += f"  best optuna tpe {best_optuna:.6f}  sweep tpe / optuna {best_tpe / best_optuna:.4f}"
            print(line, flush=True)
    print(f"tpe better than or equal to random in {wins} of {a.seeds} seeds (target >= 4)")
    if ratios:
        print(f"best loss, sweep tpe / optuna tpe: median {statistics.median(ratios):.4f}, "
              f"range {min(ratios):.4f}-{max(ratios):.4f}")
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    return 0 if wins >= 4 else 1


if __name__ == "__main__":
    sys.exit(main())
