"""The small training programs the Python tests run through a grid's `program:` section,
both halves of them: what a test does to run one (write_program, program_grid,
runs_by_mode) and what the program does once sweep starts it (program_run, TinyRecord).

A program's source is a string of its test, written out by write_program after PRELUDE,
which makes this module and cli_util importable in it:

    out, text, pairs = program_run()            # its --out and its run config
    with TinyRecord(out, text, pairs) as r:     # one tensor, checksummed at step 0
        r.step(1, loss=1.0, lr=0.1)             # /metrics and 10 ms of rank time
        r.checksum(1)
        r.finish()
"""

import os

from cli_util import HERE, program_run  # noqa: F401 (program_run: for the programs)

#: The first lines of every program write_program writes: this folder on sys.path (the
#: program runs as sweep starts it, in a directory of its own, with the test's environment).
PRELUDE = 'import os, sys\nsys.path.insert(0, os.environ["SWEEP_TEST_PYTHON_DIR"])\n'


def write_program(path, source):
    """Writes PRELUDE and `source` as the program file `path` (returned), and points
    $SWEEP_TEST_PYTHON_DIR, which sweep passes on to the program, at this folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(PRELUDE + source)
    os.environ["SWEEP_TEST_PYTHON_DIR"] = HERE
    return path


def program_grid(path, name, script, kind, base, grid=None, modes=None, default="ok", program=None, launch=None):
    """Writes the grid file `path` (returned) of sweep `name` whose runs start `script`
    under python3 -u as model.kind `kind`, with the `base` keys and the `grid` axes.
    `modes`: the choices of the program's own key model.mode (`default` unless a run sets
    it); `program`, `launch`: more keys of those sections."""
    import yaml

    section = {"argv": ["/usr/bin/python3", "-u", script], "kind": kind}
    if modes is not None:
        section["keys"] = {"mode": {"type": "choice", "default": default, "choices": list(modes)}}
    g = {"name": name, "program": dict(section, **(program or {})), "base": base}
    if grid is not None:
        g["grid"] = grid
    if launch is not None:
        g["launch"] = launch
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(g, f, sort_keys=False)
    return path


def runs_by_mode(out):
    """model.mode -> run id of every run directory of the sweep directory `out`."""
    import yaml

    ids = {}
    for rid in os.listdir(os.path.join(out, "runs")):
        with open(os.path.join(out, "runs", rid, "config.yaml"), encoding="utf-8") as f:
            ids[yaml.safe_load(f)["model"]["mode"]] = rid
    return ids


class TinyRecord:
    """A program's record (python/sweep_record) of a model of one tensor, w = [0, 1, 2, 3],
    that training never changes: w's checksums at step 0 (appended here) and wherever the
    program asks. Used like its RecordWriter, `writer` (`with`, finish, abandon, flush);
    the run id is that of `text` unless `run_id` says otherwise."""

    def __init__(self, out, text, pairs, run_id=None, environment=None):
        import numpy as np
        import sweep_record as sr

        self._checksums_of = sr.checksums_of
        self.params = [("w", np.arange(4, dtype=np.float32))]
        self.writer = sr.RecordWriter(out, run_id=run_id, config_yaml=text, config=pairs, environment=environment,
                                      params=[(n, a.shape) for n, a in self.params])
        self.checksum(0)

    def checksum(self, step):
        self.writer.append_checksum(step, *self._checksums_of(self.params))

    def step(self, step, loss, lr):
        """One optimizer step (gradient norm 1, 8 tokens) and one rank's 10 ms for it."""
        self.writer.append_step({"step": step, "loss": loss, "lr": lr, "grad_norm": 1.0, "tokens": 8})
        self.writer.append_rank_times([0.01])

    def finish(self, status="completed", failure=""):
        self.writer.finish(status, failure)

    def abandon(self, failure):
        self.writer.abandon(failure)

    def flush(self):
        self.writer.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.writer.__exit__(*exc)
