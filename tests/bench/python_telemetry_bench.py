#!/usr/bin/python3
"""What gradient telemetry costs a PyTorch script (issue 40): examples/pytorch-script/train.py
as shipped (run.clip_grad_norm_: torch's clip with each tensor's norm every 10th step and the
last, and the spike rule on every step's norm) against the same script clipping with
torch.nn.utils.clip_grad_norm_ and no telemetry, side by side; exit 1 when the script with
telemetry takes more than 1.02x the step time. A third program, run.gradients(step, loss)
before torch's clip (what a script that does not clip through sweep pays), is timed beside
them and reported, not judged.

Usage: python_telemetry_bench.py [--rounds N] [--steps S] [--quick]
  --rounds N: rounds (default 5), each running the programs, the order rotating;
  --steps S: steps a run (default 300; the first 20 are warm-up and not counted);
  --quick: 1 round of 60 steps, figures printed, not judged.

Timing: each run writes its record standalone (train.py --out DIR, python/sweep_record);
the figure of a run is the median of its record's step_time_s (the time between two
run.log calls: the whole step, telemetry included) after the warm-up; the ratio of a round
is with over without, and the result the median over rounds.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch-script")
QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
STEPS = 60 if QUICK else int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 300
WARM = 20
TARGET = 1.02
LINE = "    norm = run.clip_grad_norm_(step, loss, "
TORCH_CLIP = '    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip if args.clip > 0 else float("inf")).item()\n'
# The program's line in place of LINE: the example's own, torch's clip alone, or
# run.gradients before torch's clip.
VARIANTS = {"with": None, "without": TORCH_CLIP, "gradients": "    run.gradients(step, loss)\n" + TORCH_CLIP}


def program(tmp, name, replacement):
    """A copy of the example (train.py, model.py, its data) with its line replaced."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    shutil.copy(os.path.join(EXAMPLE, "model.py"), d)
    os.symlink(os.path.join(EXAMPLE, "data"), os.path.join(d, "data"))
    with open(os.path.join(EXAMPLE, "train.py"), encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.startswith(LINE)]
    if len(hits) != 1:
        sys.exit(f"{EXAMPLE}/train.py: expected one line starting {LINE.strip()!r}, found {len(hits)}")
    if replacement is not None:
        lines[hits[0]] = replacement
    with open(os.path.join(d, "train.py"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return d


def step_time(d, out):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")
    subprocess.run(["/usr/bin/python3", "train.py", "--steps", str(STEPS), "--eval-every", str(STEPS), "--out", out],
                   cwd=d, env=env, check=True, stdout=subprocess.DEVNULL)
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        times = f["metrics/step_time_s"][WARM:]
        rows = len(f["telemetry/step"]) if "telemetry" in f else 0
    shutil.rmtree(out)
    return statistics.median(times), rows


def main():
    with tempfile.TemporaryDirectory(prefix="python_telemetry_bench_") as tmp:
        sides = [(name, program(tmp, name, line)) for name, line in VARIANTS.items()]
        times = {name: [] for name in VARIANTS}
        rows = {}
        ratios, gradient_ratios = [], []
        for r in range(ROUNDS):
            for name, d in sides[r % len(sides):] + sides[:r % len(sides)]:
                t, rows[name] = step_time(d, os.path.join(tmp, "out_" + name))
                times[name].append(t)
            ratios.append(times["with"][-1] / times["without"][-1])
            gradient_ratios.append(times["gradients"][-1] / times["without"][-1])
            print(f"round {r + 1}: with {times['with'][-1] * 1e3:.3f} ms, without {times['without'][-1] * 1e3:.3f} ms,"
                  f" ratio {ratios[-1]:.4f}; run.gradients before torch's clip {times['gradients'][-1] * 1e3:.3f} ms,"
                  f" ratio {gradient_ratios[-1]:.4f}", flush=True)
        ratio = statistics.median(ratios)
        print(f"run.gradients before torch's clip (reported, not judged): median step "
              f"{statistics.median(times['gradients']) * 1e3:.3f} ms, median ratio {statistics.median(gradient_ratios):.4f}")
        print(f"steps {STEPS} (warm-up {WARM}), rounds {ROUNDS}: median step with telemetry "
              f"{statistics.median(times['with']) * 1e3:.3f} ms ({rows['with']} telemetry rows), without "
              f"{statistics.median(times['without']) * 1e3:.3f} ms ({rows['without']} rows); median ratio {ratio:.4f}"
              f" (target <= {TARGET})")
        if not QUICK and ratio > TARGET:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
