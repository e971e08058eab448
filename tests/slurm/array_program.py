#!/usr/bin/python3
"""A one-rank program for the Slurm array tests (a grid's `program:`): notes that it
started (RUN_DIR/started), with --hold waits until the sweep directory holds a file named
`release` (at most 300 s), then writes a small record over python/sweep_record and notes
when it ran (RUN_DIR/span: start and end, in ns of the machine's clock, which every test
node shares) so that a test can count how many ran at once.

  array_program.py [--hold] --config RUN.yaml --out DIR [--sweep-id S] [--resume]
"""
import os
import sys
import time

here = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "python"))
import numpy as np  # noqa: E402
import sweep_record as sr  # noqa: E402
from cli_util import read_run_config  # noqa: E402

start = time.time_ns()
args = sys.argv[1:]
config, out = args[args.index("--config") + 1], args[args.index("--out") + 1]
with open(os.path.join(out, "started"), "w") as f:
    f.write("%d\n" % start)
if "--hold" in args:
    release = os.path.join(os.path.dirname(os.path.dirname(out)), "release")  # <sweep>/runs/<id> -> <sweep>
    deadline = time.time() + 300
    while not os.path.exists(release):
        if time.time() > deadline:
            print("array_program: error: no release within 300 s", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.1)
text, pairs = read_run_config(config)
params = [("w", np.arange(4, dtype=np.float32))]
with sr.RecordWriter(out, run_id=sr.run_id_of(text), config_yaml=text, config=pairs, world_size=1,
                     environment={"device": "cpu", "hosts": os.uname().nodename},
                     params=[(n, a.shape) for n, a in params]) as w:
    w.append_checksum(0, *sr.checksums_of(params))
    w.append_step({"step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0, "tokens": 8})
    w.append_rank_times([0.01])
    w.append_checksum(1, *sr.checksums_of(params))
    w.set_memory([32], [32], [0])
    w.finish()
with open(os.path.join(out, "span"), "w") as f:
    f.write("%d %d\n" % (start, time.time_ns()))
