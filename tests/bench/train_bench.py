#!/usr/bin/python3
"""Throughput benchmark (issue 3): sweep-train vs the PyTorch eager reference of the same
model, batch and thread count, side by side in one run. Prints tokens/s of each, their
ratio, model FLOP/s as a fraction of the one-thread sgemm peak measured in this run, and
sweep-train's recording overhead (checksums + record writes) as a fraction of wall time,
each with its target; exits 1 when a target is missed.

Usage: train_bench.py BIN_DIR [--rounds N] [--quick] [--device cuda] [--blas K[,K2]] [--eval]
  --rounds N: rounds (default 5). --quick: one round of fewer steps, a smoke run: the
  figures are printed, the targets are not judged (exit 0 unless a program fails).
  --device cuda: both programs on the GPU, the peak is the GPU's fp32 matmul (TF32 off),
  and no target is judged (the targets are for the 2-core CPU machine).
  --blas K: both programs and the sgemm peak on OpenBLAS kernel K: native (OpenBLAS's own
  choice), auto (what `sweep blas --kernel auto` chooses here, as launch.blas auto does) or
  a kernel name; the targets are judged only for native. --blas A,B runs the whole
  benchmark once per kernel (a process each: OpenBLAS reads its kernel when it loads) and
  prints their tok/s and sgemm peaks side by side.
  --eval: each round also runs sweep-train with held-out evaluation and prints its cost
  (the recorded evaluation time over the timed wall time), apart from the overhead.
Exit status: 0, or 1 when a judged target is missed (a failing program raises: exit 1).

How both programs are timed (one method): each prints a line "step N" when step N is
done (sweep-train's own log line, log_every 1; reference_trainer.py's), on a pseudo-
terminal so that every line arrives when it is written. This script stamps each line with
time.perf_counter() as it reads it. tokens/s = tokens per step x (steps - warm-up) / (time
of the last step's line - time of the warm-up's last step line): wall clock around the
same loop, the same warm-up steps excluded, startup and teardown outside the window. Both
programs do all their per-step work inside that window (sweep-train: checksums every step
and its record appends; PyTorch: nothing else).

sgemm peak and MFU (one way): at the start of every round the script times 20 1024^3 fp32
matmuls (after 3 untimed) through PyTorch, which calls the same OpenBLAS as LibTorch, at
one thread (GPU: 8192^3, TF32 off), FLOPs = 2 n^3, and keeps their median. The peak is the
highest of those round medians: what this machine showed it can do in this run (a round's
own median, taken in a busy moment, gave MFUs above 100%). A round's MFU is that round's
tok/s x model FLOPs per token / the peak. Every reported figure (tok/s, ratio, MFU,
overhead) is the median over rounds of the per-round figure; the per-round peaks, ratios
and MFUs are printed too.

Model FLOPs per token (one formula, used for both programs): 6 x (matmul parameters:
every weight except the embedding and the norm gains) + 12 x layers x seq_len x d_model
for the attention scores and their weighted sums (forward + backward).

Recording overhead: sweep-train's /metrics/record_time_s (checksums and record flushes,
timed inside sweep-train) summed over the timed steps, over the wall time of those steps.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from step_lines import step_line_times  # tests/bench/step_lines.py

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
BLAS = sys.argv[sys.argv.index("--blas") + 1] if "--blas" in sys.argv else "native"


def side_by_side(kernels):
    """Runs this benchmark once per kernel and prints the figures that differ side by side."""
    figures = {}
    for k in kernels:
        argv = [sys.executable, os.path.abspath(__file__)] + [a if a != BLAS else k for a in sys.argv[1:]]
        p = subprocess.run(argv, capture_output=True, text=True)
        print(f"=== --blas {k} (exit {p.returncode})\n{p.stdout}{p.stderr}", end="")
        peak = re.search(r"peak = the highest, ([\d.]+) GFLOP/s", p.stdout)
        kernel = re.search(r"(?m)^BLAS: .* kernel (\w*)$", p.stdout)
        rows = re.findall(r"(?m)^(\w+)\s+sweep-train\s+(\d+) tok/s\s+pytorch\s+(\d+) tok/s", p.stdout)
        figures[k] = (kernel.group(1) if kernel else "?", float(peak.group(1)) if peak else float("nan"),
                      {name: (int(c), int(r)) for name, c, r in rows})
    a, b = kernels
    print(f"=== side by side: --blas {a} (kernel {figures[a][0]}) vs --blas {b} (kernel {figures[b][0]})")
    print(f"sgemm peak: {figures[a][1]:.1f} vs {figures[b][1]:.1f} GFLOP/s ({figures[b][1] / figures[a][1]:.2f}x)")
    for name in figures[a][2]:
        (ca, ra), (cb, rb) = figures[a][2][name], figures[b][2].get(name, (0, 0))
        print(f"{name:6s} sweep-train {ca} vs {cb} tok/s ({cb / ca:.2f}x); pytorch {ra} vs {rb} tok/s ({rb / ra:.2f}x)")
    return 0


if "," in BLAS:
    sys.exit(side_by_side(BLAS.split(",", 1)))
# The kernel, set before torch loads OpenBLAS; sweep-train inherits it.
os.environ.pop("OPENBLAS_CORETYPE", None)
if BLAS == "auto":
    out = subprocess.run([os.path.join(BIN, "sweep"), "blas", "--kernel", "auto"], capture_output=True, text=True,
                         check=True).stdout
    chosen = re.search(r"\(OPENBLAS_CORETYPE=(\w+)\)", out)
    if chosen:
        os.environ["OPENBLAS_CORETYPE"] = chosen.group(1)
elif BLAS != "native":
    os.environ["OPENBLAS_CORETYPE"] = BLAS
JUDGE = not QUICK and DEVICE == "cpu" and BLAS == "native"
THREADS = 1
# torch.set_num_threads does not limit the OpenBLAS that Debian's PyTorch calls: set its
# pool before torch loads it, or the "one-thread" peak uses every core.
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402

try:
    import h5py  # noqa: E402
except ImportError:  # a GPU machine with PyTorch but no h5py: no recording overhead
    h5py = None

CONFIGS = {
    # name: (layers, d_model, heads, vocab, seq, micro_batch, accum, steps, warmup)
    "tiny": (2, 64, 4, 256, 32, 4, 1, 300 if not QUICK else 40, 20),
    "small": (4, 256, 4, 256, 128, 8, 1, 40 if not QUICK else 8, 5),
}
# Targets (tests/bench/README.md): sweep-train / PyTorch tok/s, sweep-train MFU, overhead.
TARGET_RATIO = {"tiny": 1.5, "small": 1.0}
TARGET_MFU = {"small": 0.75}
TARGET_OVERHEAD = 0.02


def model_flops_per_token(layers, d, heads, vocab, seq):
    hidden = (4 * d * 2 // 3 + 7) // 8 * 8
    matmul_params = layers * (4 * d * d + 3 * d * hidden) + vocab * d
    return 6 * matmul_params + 12 * layers * seq * d


def sgemm_peak(threads, n=1024, reps=20):
    """fp32 matmul FLOP/s: one CPU thread, or the GPU (TF32 off) with --device cuda."""
    torch.set_num_threads(threads)
    if DEVICE != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = False
        n = 8192
    a, b = torch.randn(n, n, device=DEVICE), torch.randn(n, n, device=DEVICE)
    times = []
    for i in range(3 + reps):
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        t = time.perf_counter()
        a @ b
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def tokens_per_s(stamps, cfg):
    layers, d, heads, vocab, seq, mb, accum, steps, warm = cfg
    missing = [s for s in (warm, steps) if s not in stamps]
    if missing:
        raise RuntimeError(f"no 'step N' line for steps {missing}")
    wall = stamps[steps] - stamps[warm]
    return mb * accum * seq * (steps - warm) / wall, wall


# --eval: each round also runs sweep-train with held-out evaluation (1% of the sequences
# held out, EVAL_EVERY and EVAL_BATCHES below) and reports what evaluation costs: its
# recorded /eval/time_s over the timed window, apart from the recording overhead.
EVAL = "--eval" in sys.argv
EVAL_EVERY, EVAL_BATCHES = 10, 4


def run_sweep_train(name, cfg, tmp, round_no, evaluate=False):
    layers, d, heads, vocab, seq, mb, accum, steps, warm = cfg
    path = os.path.join(tmp, f"{name}{'-eval' if evaluate else ''}.yaml")
    with open(path, "w") as f:
        f.write(f"model: {{layers: {layers}, d_model: {d}, heads: {heads}, vocab: {vocab}, seq_len: {seq}}}\n")
        if evaluate:
            f.write("data: {eval_fraction: 0.01}\n")
        f.write(f"train: {{steps: {steps}, micro_batch: {mb}, accum: {accum}, lr: 1.0e-3, clip_norm: 1.0,"
                f" threads: {THREADS}, checksum_every: 1, log_every: 1"
                + (f", eval_every: {EVAL_EVERY}, eval_batches: {EVAL_BATCHES}" if evaluate else "") + "}\n")
    out = os.path.join(tmp, f"{name}{'-eval' if evaluate else ''}-{round_no}")
    stamps = step_line_times([os.path.join(BIN, "sweep-train"), "--config", path, "--out", out, "--device", DEVICE])
    tps, wall = tokens_per_s(stamps, cfg)
    overhead, blas = float("nan"), "(h5py missing: not read)"
    if h5py is not None:
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            if evaluate:  # evaluations after steps warm+1 .. steps-1 lie inside the timed window
                ev_step, ev_time = f["eval/step"][:], f["eval/time_s"][:]
                return tps, ev_time[(ev_step > warm) & (ev_step < steps)].sum() / wall, ""
            overhead = f["metrics/record_time_s"][warm:steps].sum() / wall  # rows are steps 1..steps
            env = f["environment"].attrs
            kernel = env["blas.kernel"] if "blas.kernel" in env else ""
            blas = f"{env['blas']} kernel {kernel.decode() if isinstance(kernel, bytes) else kernel}"
    return tps, overhead, blas


def run_reference(cfg):
    here = os.path.dirname(os.path.abspath(__file__))
    stamps = step_line_times(["/usr/bin/python3", os.path.join(here, "reference_trainer.py"),
                              *map(str, cfg), str(THREADS), DEVICE])
    return tokens_per_s(stamps, cfg)[0]


def verdict(value, target, fmt, cmp):
    """("(target >= X: met)", met); met is None when the target is not judged."""
    if target is None:
        return "", None
    if not JUDGE:
        return f"(target {cmp} {fmt.format(target)}: not judged)", None
    met = value >= target if cmp == ">=" else value < target
    return f"(target {cmp} {fmt.format(target)}: {'met' if met else 'MISSED'})", met


# This machine's speed drifts by 10-30% from minute to minute (other tenants), so every
# figure is a median over rounds of a per-round figure; a round measures the peak and then
# runs both programs on each config back to back, in an order that alternates between
# rounds, so each round's ratio and MFU compare things that ran under the same conditions.
ROUNDS = 1 if QUICK else int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
peaks, results = [], {name: {"cpp": [], "ref": [], "overhead": [], "eval": []} for name in CONFIGS}
blas = ""
with tempfile.TemporaryDirectory() as tmp:
    for round_no in range(ROUNDS):
        peaks.append(sgemm_peak(THREADS))
        for name, cfg in CONFIGS.items():
            r = results[name]
            for side in (("cpp", "ref") if round_no % 2 == 0 else ("ref", "cpp")):
                if side == "cpp":
                    cpp, overhead, blas = run_sweep_train(name, cfg, tmp, round_no)
                    r["cpp"].append(cpp)
                    r["overhead"].append(overhead)
                else:
                    r["ref"].append(run_reference(cfg))
            if EVAL:
                r["eval"].append(run_sweep_train(name, cfg, tmp, round_no, evaluate=True)[1])
what = f"{THREADS} thread, 1024^3, PyTorch/OpenBLAS" if DEVICE == "cpu" else "GPU, 8192^3 fp32, TF32 off"
judged = "" if JUDGE else "; targets not judged (" + (
    "--quick" if QUICK else "--device " + DEVICE if DEVICE != "cpu" else "--blas " + BLAS) + ")"
print(f"timing: wall clock between the 'step <warm-up>' and 'step <last>' lines of each program; {ROUNDS} round(s); "
      f"each figure is the median over rounds of the per-round figure{judged}")
peak = max(peaks)
print(f"sgemm per round ({what}): {', '.join(f'{p / 1e9:.1f}' for p in peaks)} GFLOP/s; peak = the highest, "
      f"{peak / 1e9:.1f} GFLOP/s; MFU of a round = its tok/s x model FLOPs per token / the peak")
med = statistics.median
missed = []
for name, cfg in CONFIGS.items():
    r = results[name]
    fpt = model_flops_per_token(*cfg[:5])
    ratios = [c / f for c, f in zip(r["cpp"], r["ref"])]
    mfu_cpp = [c * fpt / peak for c in r["cpp"]]
    mfu_ref = [f * fpt / peak for f in r["ref"]]
    ratio, overhead = med(ratios), med(r["overhead"])
    parts = [(ratio, TARGET_RATIO.get(name), "{:.2f}x", ">=", "ratio"),
             (med(mfu_cpp), TARGET_MFU.get(name), "{:.0%}", ">=", "MFU"),
             (overhead, TARGET_OVERHEAD if h5py is not None else None, "{:.0%}", "<", "recording overhead")]
    texts = {}
    for value, target, fmt, cmp, label in parts:
        text, met = verdict(value, target, fmt, cmp)
        texts[label] = " " + text if text else ""
        if met is False:
            missed.append(f"{name} {label}")
    print(f"{name:6s} sweep-train {med(r['cpp']):8.0f} tok/s  pytorch {med(r['ref']):8.0f} tok/s  "
          f"ratio {ratio:.2f}x{texts['ratio']} (per round: {', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"{'':6s} MFU sweep-train {med(mfu_cpp):.1%}{texts['MFU']} (per round: "
          f"{', '.join(f'{x:.1%}' for x in mfu_cpp)})  pytorch {med(mfu_ref):.1%}  "
          f"recording overhead {overhead:.2%}{texts['recording overhead']} (checksum_every 1)")
    if EVAL and h5py is not None:
        print(f"{'':6s} evaluation cost {med(r['eval']):.2%} of the timed wall time (eval_every {EVAL_EVERY}, "
              f"eval_batches {EVAL_BATCHES}; per round: {', '.join(f'{x:.2%}' for x in r['eval'])}; "
              f"apart from the recording overhead and the steps' tok/s)")
print(f"BLAS: {blas}")
if JUDGE:
    print("targets: " + ("MISSED: " + ", ".join(missed) + " (exit 1)" if missed else "all met (exit 0)"))
sys.exit(1 if missed else 0)
