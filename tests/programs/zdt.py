"""ZDT1 and ZDT2 (Zitzler, Deb and Thiele, "Comparison of multiobjective evolutionary
algorithms: empirical results", Evolutionary Computation 2000) as a program a sweep search
runs: its variables are the program keys x0 .. x{n-1} (model.x0, ...), each in [0, 1];
model.problem picks zdt1 or zdt2 and model.n how many variables count. It reports both
objectives as metrics of its own at step 1 (search.metric: [metrics.f1, metrics.f2]).
Both have f1 = x0 and f2 = g h with g = 1 + 9 mean(x1 .. x{n-1}); h = 1 - sqrt(f1 / g) for
zdt1 (a convex front), 1 - (f1 / g)^2 for zdt2 (a concave one); the fronts are at g = 1.
tests/bench/pareto_bench.py and tests/python/test_pareto_search.py run it.
"""

import math


def zdt(problem, x):
    """(f1, f2) of `problem` at the point x (a list of floats in [0, 1])."""
    f1 = x[0]
    g = 1 + 9 * sum(x[1:]) / (len(x) - 1)
    h = 1 - math.sqrt(f1 / g) if problem == "zdt1" else 1 - (f1 / g) ** 2
    return f1, g * h


def main():
    import sweep  # here: the benchmark imports zdt() without the package

    settings = {"problem": "zdt1", "n": 30}
    settings.update({"x%d" % i: 0.5 for i in range(30)})
    run = sweep.init(settings)
    n = int(settings["n"])
    f1, f2 = zdt(settings["problem"], [float(settings["x%d" % i]) for i in range(n)])
    run.log(1, f1, f1=f1, f2=f2)
    run.finish()


if __name__ == "__main__":
    main()
