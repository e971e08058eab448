# Linear regression in float32 (the same bits every run) that also logs its "MFU": the
# step's floating-point operations over its wall time, never the same twice. It declares
# mfu a timing metric, so bitwise verdicts leave it out and show it apart; a grid that sets
# its key `declare` to none makes it leave the declaration out (tests/python/test_timing_metrics.py).
import time

import numpy as np

import sweep

settings = {"steps": 20, "lr": 0.05, "declare": "api"}
run = sweep.init(settings)
if settings["declare"] == "api":
    run.declare_timing("mfu")
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype(np.float32)
y = x @ np.arange(8, dtype=np.float32)
w = np.zeros(8, dtype=np.float32)
run.watch([("w", w)], every=5)
flops = 6.0 * x.size
for step in range(1, settings["steps"] + 1):
    start = time.perf_counter()
    err = x @ w - y
    loss = float(np.mean(err * err))
    w -= np.float32(settings["lr"]) * (np.float32(2.0 / len(x)) * (x.T @ err))
    seconds = time.perf_counter() - start
    run.log(step, loss, lr=settings["lr"], tokens=len(x), mfu=flops / max(seconds, 1e-9) / 1e12)
run.finish()
