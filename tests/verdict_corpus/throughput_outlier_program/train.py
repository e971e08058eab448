# Linear regression whose step time it states itself: the `slow` run says each step took
# ten times as long as the others' (as a run on a bad node would), so its tokens/s are a
# tenth of its peers'.
import numpy as np

import sweep

settings = {"steps": 12, "lr": 0.05, "seed": 0, "slow": 0}
run = sweep.init(settings)
rng = np.random.default_rng(settings["seed"])
x = rng.standard_normal((64, 8)).astype(np.float32)
y = x @ np.arange(8, dtype=np.float32)
w = np.zeros(8, dtype=np.float32)
run.watch([("w", w)], every=4)
for step in range(1, settings["steps"] + 1):
    err = x @ w - y
    loss = float(np.mean(err * err))
    w -= np.float32(settings["lr"]) * (np.float32(2.0 / len(x)) * (x.T @ err))
    run.log(step, loss, lr=settings["lr"], tokens=len(x), step_time_s=0.01 * (10 if settings["slow"] else 1))
run.finish()
