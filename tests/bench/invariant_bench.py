#!/usr/bin/python3
"""What sweep.invariant's canonical step costs against plain DDP (issue 37).

Runs examples/pytorch-invariant/train.py's two step functions in one mpiexec job of W
ranks (gloo on the CPU): invariant_step (each leaf's gradient folded into the canonical
tree, two all-to-alls) and plain_ddp_step (DDP's bucketed all-reduce, no_sync for the
accumulation), on the same model, the same settings and the same batches, alternating step
by step so both see the same machine. Each step starts after a barrier and is timed on
rank 0 from its start to its end (the optimizer update included). Prints the median step
time of each and their ratio for each model width given, next to the target (invariant /
plain DDP <= 1.15), and the load average before it started; exit 1 when a ratio misses it.

  tests/bench/invariant_bench.py [--world 2] [--steps 60] [--warmup 10] [--sizes 32,128]
"""
import argparse
import gc
import importlib.util
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(ROOT, "examples", "pytorch-invariant", "train.py")
TARGET = 1.15  # the invariant step's time over plain DDP's, at most


def launch(opt):
    """Starts this script again under mpiexec as the worker; 1 when a target is missed."""
    print("load average before: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), MASTER_PORT=str(opt.port))
    cmd = ["mpiexec", "--oversubscribe", "-n", str(opt.world), sys.executable, os.path.abspath(__file__),
           "--worker"] + sys.argv[1:]
    return subprocess.call(cmd, env=env)


def worker(opt):
    spec = importlib.util.spec_from_file_location("invariant_example", TRAIN)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    import torch
    import torch.distributed as dist
    from sweep import invariant

    rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    first, missed = True, False
    for width in opt.sizes:
        argv = ["--world-batch", str(opt.world_batch), "--accum", str(opt.accum), "--width", str(width),
                "--vocab", str(opt.vocab), "--seq-len", str(opt.seq_len), "--steps", str(opt.steps + opt.warmup),
                "--schedule", "constant", "--warmup", "0", "--clip", "1.0", "--quiet"]
        settings = {name: example.parse_options(argv + (["--plain-ddp"] if name == "ddp" else []))
                    for name in ("invariant", "ddp")}
        if first:
            example.init_distributed(settings["invariant"])  # the one process group of the job
            first = False
        runs, steps = {}, {"invariant": example.invariant_step, "ddp": example.plain_ddp_step}
        for name, s in settings.items():
            layout = invariant.Layout(s.world_batch, world, rank, accum=s.accum)
            runs[name] = example.Run(s, layout)
            runs[name].start()
        params = sum(p.numel() for p in runs["invariant"].model.parameters())
        times = {name: [] for name in runs}
        for step in range(1, opt.steps + opt.warmup + 1):
            order = list(runs) if step % 2 else list(reversed(list(runs)))  # neither always goes first
            for name in order:
                dist.barrier()
                start = time.perf_counter()
                steps[name](runs[name], step)
                if step > opt.warmup:
                    times[name].append(time.perf_counter() - start)
        med = {name: statistics.median(t) for name, t in times.items()}
        ratio = med["invariant"] / med["ddp"]
        missed = missed or (rank == 0 and ratio > TARGET)  # rank 0's times are the figures
        if rank == 0:
            print("W=%d A=%d global batch %d, width %d (%d parameters): median step invariant %.3f ms, "
                  "plain DDP %.3f ms, ratio %.3f (target <= %.2f: %s; %d steps each)"
                  % (world, opt.accum, opt.world_batch, width, params, med["invariant"] * 1e3, med["ddp"] * 1e3,
                     ratio, TARGET, "missed" if ratio > TARGET else "met", opt.steps), flush=True)
        del runs  # DDP before its process group: the other order can abort at exit in torch 1.13
        gc.collect()
    dist.destroy_process_group()
    return 1 if missed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, default=2, help="ranks (mpiexec -n)")
    p.add_argument("--steps", type=int, default=60, help="timed steps of each kind")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps of each kind first")
    p.add_argument("--world-batch", type=int, default=16, help="sequences per step")
    p.add_argument("--accum", type=int, default=2, help="micro-batches per rank per step")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--sizes", default="32,128", help="model widths, comma-separated")
    p.add_argument("--port", type=int, default=29517, help="the rendezvous port")
    opt = p.parse_args()
    opt.sizes = [int(w) for w in opt.sizes.split(",")]
    return worker(opt) if opt.worker else launch(opt)


if __name__ == "__main__":
    sys.exit(main())
