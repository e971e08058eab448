#!/usr/bin/python3
"""A multi-rank training program for the tests of a grid's `program:` section: run by
`sweep` under mpiexec or srun, each rank notes what it was given (RUN_DIR/seen-rank<R>.json:
its argv, its rank and world size as the launcher set them, the SWEEP_* variables); rank 0
waits for every rank's note, then writes a small record over python/sweep_record with one
step time per rank. No MPI library: the ranks only share the run directory.

  rank_program.py --config RUN.yaml --out DIR [--sweep-id S] [--resume]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import numpy as np  # noqa: E402
import sweep_record as sr  # noqa: E402
from cli_util import read_run_config  # noqa: E402


def first(*names):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return None


args = sys.argv[1:]
config, out = args[args.index("--config") + 1], args[args.index("--out") + 1]
rank = first("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
size = first("OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS")
rank = 0 if rank is None else rank
size = 1 if size is None else size
note = {"argv": sys.argv, "rank": rank, "size": size, "host": os.uname().nodename,
        "env": {k: v for k, v in os.environ.items() if k.startswith("SWEEP_") or k in ("PYTHONHASHSEED", "OMP_NUM_THREADS")}}
with open(os.path.join(out, "seen-rank%d.json" % rank), "w") as f:
    json.dump(note, f)
if rank != 0:
    sys.exit(0)
deadline = time.time() + 60
while any(not os.path.exists(os.path.join(out, "seen-rank%d.json" % r)) for r in range(size)):
    if time.time() > deadline:
        print("rank_program: error: not every rank started within 60 s", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.05)
text, pairs = read_run_config(config)
params = [("w", np.arange(8, dtype=np.float32))]
with sr.RecordWriter(out, run_id=sr.run_id_of(text), config_yaml=text, config=pairs, world_size=size,
                     environment={"device": "cpu", "hosts": note["host"]},
                     params=[(n, a.shape) for n, a in params]) as w:
    w.append_checksum(0, *sr.checksums_of(params))
    for step in (1, 2):
        params[0][1][:] *= np.float32(0.5)
        w.append_step({"step": step, "loss": 1.0 / step, "lr": 0.1, "grad_norm": 1.0, "tokens": 8})
        w.append_rank_times([0.01] * size)
        w.append_checksum(step, *sr.checksums_of(params))
    w.set_memory([32] * size, [32] * size, [0] * size)
    w.finish()
print("rank_program: completed on %d ranks" % size)
