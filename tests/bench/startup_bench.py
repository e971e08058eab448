#!/usr/bin/python3
"""What a one-rank run pays to start: sweep-train on a one-step tiny model, from exec to
exit, without MPI (a process no launcher started: SoloCommunicator) against the same run
that starts MPI as a singleton (forced here with PMI_SIZE=1, which makes sweep-train take
the MPI path; Open MPI then starts its orted as for any singleton). Side by side, the two
alternating, timed the same way (wall time of the whole process).

Usage: startup_bench.py BIN_DIR [--rounds N]   (default 5 rounds)
Exit status: 0, or 1 when a run fails or the two records differ in their bits.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
CONFIG = "model: {layers: 1, d_model: 16, heads: 2, vocab: 32, seq_len: 8}\ntrain: {steps: 1, micro_batch: 1}\n"


def run(tmp, name, extra_env):
    out = os.path.join(tmp, name)
    env = dict(os.environ)
    for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"):
        env.pop(v, None)
    env.update(extra_env)
    t0 = time.monotonic()
    subprocess.run([os.path.join(BIN, "sweep-train"), "--config", os.path.join(tmp, "c.yaml"), "--out", out,
                    "--quiet"], env=env, check=True)
    return time.monotonic() - t0, os.path.join(out, "record.h5")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "c.yaml"), "w") as f:
            f.write(CONFIG)
        solo, mpi = [], []
        for r in range(ROUNDS):
            order = [("solo", {}), ("mpi", {"PMI_SIZE": "1"})]
            if r % 2:
                order.reverse()
            for name, env in order:
                seconds, record = run(tmp, f"{name}{r}", env)
                (solo if name == "solo" else mpi).append(seconds)
            print(f"startup_bench: round {r + 1}: without MPI {solo[-1]:.3f} s, MPI singleton {mpi[-1]:.3f} s")
        same = subprocess.run([os.path.join(BIN, "sweep"), "compare", os.path.join(tmp, "solo0", "record.h5"),
                               os.path.join(tmp, "mpi0", "record.h5")], capture_output=True, text=True)
        ms, mm = statistics.median(solo), statistics.median(mpi)
        print(f"startup_bench: median over {ROUNDS} rounds: without MPI {ms:.3f} s, MPI singleton {mm:.3f} s, "
              f"saved {mm - ms:.3f} s a run ({mm / ms:.2f}x)")
        print("startup_bench: records " + ("bit-identical" if same.returncode == 0 else "DIFFER:\n" + same.stdout))
        return 0 if same.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
