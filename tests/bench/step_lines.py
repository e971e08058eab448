"""When each step of a training program ended, seen from outside: the one timing method
of the whole-run benchmarks (train_bench.py, api_bench.py).

step_line_times(argv) runs argv with stdout and stderr on a pseudo-terminal, so every line
arrives when it is written, and stamps each "step N" line with time.perf_counter() as it is
read; it returns {N: stamp}. Raises RuntimeError with the output's tail when argv fails.
seconds_per_step(program, config, out, warm, steps): a training program's wall time per
step over steps warm+1 .. steps, from those stamps (api_bench.py, telemetry_bench.py).
"""
import os
import pty
import re
import subprocess
import time

STEP_LINE = re.compile(rb"^step\s+(\d+)(\s|$)")


def step_line_times(argv):
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    stamps, text, pending = {}, [], b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        now = time.perf_counter()
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            text.append(line)
            m = STEP_LINE.match(line)
            if m:
                stamps[int(m.group(1))] = now
    os.close(master)
    if proc.wait() != 0:
        tail = b"\n".join(text[-20:]).decode(errors="replace")
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}:\n{tail}")
    return stamps


def seconds_per_step(program, config, out, warm, steps):
    stamps = step_line_times([program, "--config", config, "--out", out])
    missing = [s for s in (warm, steps) if s not in stamps]
    if missing:
        raise RuntimeError(f"{program}: no 'step N' line for steps {missing}")
    return (stamps[steps] - stamps[warm]) / (steps - warm)


def positional_args(argv, with_value=("--rounds",)):
    """The arguments of argv that are neither options nor the values of `with_value` options."""
    args, rest = [], iter(argv)
    for a in rest:
        if a in with_value:
            next(rest, None)
        elif not a.startswith("--"):
            args.append(a)
    return args
