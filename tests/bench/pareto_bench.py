#!/usr/bin/python3
"""Multi-objective search quality (issue 58), a benchmark, not a test: ZDT1 and ZDT2 (30
variables, tests/programs/zdt.py) searched by sweep's multi-objective TPE (`search.kind:
tpe` with `metric: [metrics.f1, metrics.f2]`, every trial one run of the program through
`sweep run`) and, in the same script, by Debian's python3-optuna on the same functions and
budget: its TPESampler (multi-objective TPE for a study with two directions, the
reference sweep's follows), and for context its NSGAIISampler and RandomSampler.

The figure is the hypervolume of each search's trials, both objectives normalised by the
bounds of ZDT's objective space (f1 in [0, 1], f2 in [0, 10]: g <= 10 and h <= 1 for any
point), with the reference point (1.1, 1.1); the true front's is 1.1767 (ZDT1) and 1.1433
(ZDT2). A second, stricter figure normalises by the ideal (0, 0) and the worst f1 and f2
any search found on that problem (every seed and sampler), reference (1.1, 1.1) again:
there the trials' spread, not the whole box, is the scale.

Prints one line per problem and seed and the summary; exits 1 when the median over the
seeds of sweep's hypervolume over Optuna TPE's is below 0.95 on either problem.

Usage: pareto_bench.py BIN_DIR [--trials 50] [--seeds 5] [--startup 10] [--vars 30]
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "programs"))
from zdt import zdt  # noqa: E402


def grid(path, problem, seed, trials, startup, n):
    keys = {"problem": {"type": "choice", "default": "zdt1", "choices": ["zdt1", "zdt2"]},
            "n": {"type": "int", "default": 30, "min": 2, "max": 30}}
    keys.update({"x%d" % i: {"type": "real", "default": 0.5, "min": 0, "max": 1} for i in range(30)})
    g = {"name": "zdt-%s-%d" % (problem, seed),
         "program": {"argv": ["/usr/bin/python3", os.path.join(ROOT, "tests", "programs", "zdt.py")],
                     "pass_args": False, "kind": "zdt", "keys": keys, "honours": ["train.steps"]},
         "base": {"train": {"steps": 1}, "model": {"problem": problem, "n": n}},
         "search": {"kind": "tpe", "samples": trials, "startup": startup, "parallel": 1, "seed": seed,
                    "metric": ["metrics.f1", "metrics.f2"], "mode": ["min", "min"],
                    "space": {"model.x%d" % i: {"uniform": [0, 1]} for i in range(n)}},
         "launch": {"parallel": 1}}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(g, f, sort_keys=False)


def sweep_points(bin_dir, work, problem, seed, trials, startup, n):
    """(f1, f2) of every trial of sweep's search, from its search.log."""
    path = os.path.join(work, "%s-%d.yaml" % (problem, seed))
    grid(path, problem, seed, trials, startup, n)
    out = os.path.join(work, "%s-%d" % (problem, seed))
    p = subprocess.run([os.path.join(bin_dir, "sweep"), "run", path, "--out", out, "--quiet"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("sweep run %s failed:\n%s%s" % (path, p.stdout, p.stderr))
    points = []
    with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("trial ") and " metrics.f1=" in line:
                words = dict(w.split("=", 1) for w in line.split() if w.startswith("metrics.f"))
                points.append((float(words["metrics.f1"]), float(words["metrics.f2"])))
    if len(points) != trials:
        sys.exit("%s: %d of %d trials in search.log" % (out, len(points), trials))
    return points


def optuna_points(sampler, problem, trials, n):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(lambda t: zdt(problem, [t.suggest_float("x%d" % i, 0, 1) for i in range(n)]), n_trials=trials)
    return [tuple(t.values) for t in study.trials]


def hypervolume(points, scale):
    """The area the points dominate below (1.1, 1.1) after dividing f1, f2 by `scale`: in
    order of f1, each point better in f2 than all before it adds the strip between its f2
    and theirs, from its f1 to the reference."""
    area, above = 0.0, 1.1
    for a, b in sorted((a / scale[0], b / scale[1]) for a, b in points):
        if a < 1.1 and b < above:
            area += (1.1 - a) * (above - b)
            above = b
    return area


def front_hv(problem, scale):
    """The hypervolume of the true front (g = 1), on a fine grid of f1."""
    return hypervolume([zdt(problem, [k / 20000] + [0.0] * 29) for k in range(20001)], scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--startup", type=int, default=10)
    ap.add_argument("--vars", type=int, default=30)
    a = ap.parse_args()
    import optuna

    work = tempfile.mkdtemp(prefix="pareto_bench.")
    results, worst = {}, {}
    for problem in ("zdt1", "zdt2"):
        for seed in range(1, a.seeds + 1):
            runs = {
                "sweep tpe": sweep_points(a.bin_dir, work, problem, seed, a.trials, a.startup, a.vars),
                "optuna tpe": optuna_points(optuna.samplers.TPESampler(seed=seed, n_startup_trials=a.startup),
                                            problem, a.trials, a.vars),
                "optuna nsga2": optuna_points(optuna.samplers.NSGAIISampler(seed=seed), problem, a.trials, a.vars),
                "optuna random": optuna_points(optuna.samplers.RandomSampler(seed=seed), problem, a.trials, a.vars),
            }
            results[(problem, seed)] = runs
            for pts in runs.values():
                w = worst.setdefault(problem, [0.0, 0.0])
                w[0], w[1] = max(w[0], max(p[0] for p in pts)), max(w[1], max(p[1] for p in pts))
    names = ["sweep tpe", "optuna tpe", "optuna nsga2", "optuna random"]
    failed = False
    print("hypervolume, reference (1.1, 1.1) after dividing f1 by 1 and f2 by 10 [and by the worst found]")
    print("problem seed " + " ".join("%-21s" % n for n in names) + " sweep/optuna-tpe")
    for problem in ("zdt1", "zdt2"):
        ratios, strict = [], []
        for seed in range(1, a.seeds + 1):
            hv = {n: hypervolume(results[(problem, seed)][n], (1.0, 10.0)) for n in names}
            hs = {n: hypervolume(results[(problem, seed)][n], worst[problem]) for n in names}
            ratios.append(hv["sweep tpe"] / hv["optuna tpe"])
            strict.append(hs["sweep tpe"] / hs["optuna tpe"] if hs["optuna tpe"] > 0 else math.inf)
            print("%-7s %4d " % (problem, seed) + " ".join("%.4f [%.4f]      " % (hv[n], hs[n]) for n in names) +
                  " %.4f [%.4f]" % (ratios[-1], strict[-1]))
        med = statistics.median(ratios)
        print("%s: true front %.4f; sweep/optuna-tpe median %.4f (range %.4f-%.4f) [stricter: median %.4f, "
              "range %.4f-%.4f]; worst found f1 %.4f f2 %.4f" %
              (problem, front_hv(problem, (1.0, 10.0)), med, min(ratios), max(ratios), statistics.median(strict),
               min(strict), max(strict), worst[problem][0], worst[problem][1]))
        failed |= med < 0.95
    print("sweep's records and search.log: " + work)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
