# A program that evaluates at the top of its next iteration (as many public training scripts
# do): the held-out loss of the weights after step k is taken at the start of iteration k,
# so a run a halving search stops after step 4 never evaluates the weights of step 4.
import numpy as np

import sweep

settings = {"steps": 8, "lr": 0.05, "eval_every": 4}
run = sweep.init(settings)
state = run.restore()
w = np.zeros(8, dtype=np.float32) if state is None else np.array(state["w"], dtype=np.float32)
start = run.resumed_from or 0
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype(np.float32)
y = x @ np.arange(8, dtype=np.float32)
held_x = rng.standard_normal((32, 8)).astype(np.float32)
held_y = held_x @ np.arange(8, dtype=np.float32)
run.watch([("w", w)], every=4)
for it in range(start, settings["steps"] + 1):
    if it % settings["eval_every"] == 0:
        run.eval(it, float(np.mean((held_x @ w - held_y) ** 2)), tokens=len(held_x))
    if it == settings["steps"]:
        break
    step = it + 1
    err = x @ w - y
    loss = float(np.mean(err * err))
    w -= np.float32(settings["lr"]) * (np.float32(2.0 / len(x)) * (x.T @ err))
    run.log(step, loss, lr=settings["lr"], tokens=len(x))
    if run.should_stop(step):
        run.save({"w": w.tolist()}, step)
        break
run.finish()
