#!/usr/bin/python3
"""A GPT training script shaped like the public ones (tests/programs/gpt: globals for its
config, a config file exec'd by a configurator, DDP detected from RANK, evaluation at the
top of its loop, iterations 0 to max_iters inclusive, a gradient accumulation count for
the whole world), adopted in at most 15 lines and driven by the real `sweep`:

a. the adoption: train.py differs from train_before.py in at most 15 lines of code;
b. its own defaults survive: a key the grid does not set keeps the script's value (min_lr
   from its config file), the record holds it, the run id hashes only what the grid set,
   and a run of one rank gets no RANK (the script runs without torch.distributed);
c. a run of two ranks has one record and the script's global batch (its accumulation
   count is global: program.accum);
d. a halving search over it replays (identical search.log in two directories), and after
   an edit of its main script (named bare in argv) and of its model file, the same search
   run again completes with every trial on the new program, with no manual step.

Usage: test_gpt_script.py [BIN_DIR] [unittest options]
"""

import difflib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PROGRAM = os.path.join(ROOT, "tests", "programs", "gpt")
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, show, sweep  # noqa: E402

GRID = """name: {name}
program:
  argv: [/usr/bin/python3, train.py, config/tiny.py]
  pass_args: false
  files: [model.py, configurator.py]
  data: [tokens.bin]
  stop: true
  kind: gpt
  accum: global
  steps: plus_one
  honours: [train.lr, train.steps, train.accum, train.micro_batch, train.min_lr, train.warmup, train.eval_every,
            train.seed]
launch: {{parallel: 1}}
base:
  data: {{kind: program}}
  train: {{{base}}}
{rest}"""


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def code_lines(path):
    """The lines of a script after its module docstring."""
    lines = read_bytes(path).decode().splitlines()
    quotes = [i for i, ln in enumerate(lines) if '"""' in ln]
    return lines[quotes[1] + 1:]


def record_of(run_dir):
    with h5py.File(os.path.join(run_dir, "record.h5"), "r") as f:
        keys = [text(k) for k in f["config/keys"][()]]
        values = [text(v) for v in f["config/values"][()]]
        env = {k: text(v) for k, v in f["environment"].attrs.items()}
        lr = f["metrics/lr"][()] if "metrics/lr" in f else []
        return {"config": dict(zip(keys, values)), "env": env, "status": text(f.attrs["status"]),
                "lr": list(lr), "yaml": text(f["config/yaml"][()])}


class GptScript(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpt_script_test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def program(self, name):
        """A copy of the program with its data, which a test may edit."""
        prog = os.path.join(self.tmp, name)
        shutil.copytree(PROGRAM, prog, ignore=shutil.ignore_patterns("__pycache__", "train_before.py"))
        subprocess.run(["/usr/bin/python3", "prepare.py"], cwd=prog, check=True)
        return prog

    def grid(self, prog, name, base, rest=""):
        path = os.path.join(prog, name + ".yaml")
        with open(path, "w") as f:
            f.write(GRID.format(name=name, base=base, rest=rest))
        return path

    def run_ids(self, out):
        return sorted(os.listdir(os.path.join(out, "runs")))

    def test_a_adoption_is_at_most_15_lines(self):
        before = code_lines(os.path.join(PROGRAM, "train_before.py"))
        after = code_lines(os.path.join(PROGRAM, "train.py"))
        changed = [ln for ln in difflib.unified_diff(before, after, lineterm="", n=0)
                   if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        self.assertLessEqual(len(changed), 15, "\n".join(changed))
        self.assertGreater(len(changed), 0)

    def test_b_own_defaults_survive(self):
        prog = self.program("defaults")
        grid = self.grid(prog, "defaults", "steps: 12, lr: 3.0e-3, eval_every: 5, threads: 1")
        out = os.path.join(self.tmp, "defaults-out")
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        [rid] = self.run_ids(out)
        run_dir = os.path.join(out, "runs", rid)
        config_text = read_bytes(os.path.join(run_dir, "config.yaml"))
        self.assertEqual(xxhash.xxh3_64_hexdigest(config_text), rid)
        # The run's config holds what the grid set, nothing of sweep's own defaults.
        self.assertNotIn(b"min_lr", config_text)
        self.assertNotIn(b"clip_norm", config_text)
        self.assertIn(b"lr: 0.003", config_text)
        r = record_of(run_dir)
        self.assertEqual(r["status"], "completed")
        # The script's own min_lr (its config file's 2e-4, not its global's 6e-5 nor sweep's 0).
        self.assertEqual(float(r["config"]["train.min_lr"]), 2e-4)
        self.assertIn("train.min_lr", r["env"]["program.script_defaults"].split())
        self.assertEqual(float(r["config"]["train.lr"]), 3e-3)
        self.assertEqual(int(r["config"]["train.steps"]), 12)  # max_iters 11, iterations 0 to 11
        self.assertEqual(len(r["lr"]), 12)
        self.assertGreater(min(r["lr"]), 1.9e-4)  # it never went below its own floor
        p = sweep("show", run_dir)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("train.min_lr = 0.0002 (the script's own)", p.stdout)
        self.assertIn("train.lr = 0.003\n", p.stdout)
        # One rank: no RANK, so the script trained without torch.distributed.
        log = read_bytes(os.path.join(run_dir, "logs", "rank0.log")).decode()
        self.assertIn("tokens per iteration will be: 512", log)  # 4 x 4 x 32: its own accumulation and batch
        self.assertEqual(int(r["config"]["train.accum"]), 4)
        # plan --show prints that config byte for byte, and what the program is handed.
        p = sweep("plan", grid, "--out", out, "--show", rid[:8])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn(config_text.decode(), p.stdout)
        self.assertIn("its step key gets train.steps - 1 = 11", p.stdout)
        self.assertIn("not set (one rank", p.stdout)
        p = sweep("plan", grid, "--out", out, "--show", "ffffffffffffffff")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("no point of the grid has that run id", p.stderr)

    @unittest.skipUnless(shutil.which("mpiexec"), "no mpiexec")
    def test_c_two_ranks_one_record_and_the_global_batch(self):
        prog = self.program("ddp")
        grid = self.grid(prog, "ddp", "steps: 6, accum: 2, eval_every: 5, threads: 1",
                         "grid:\n  dist.world_size: [2]\n")
        out = os.path.join(self.tmp, "ddp-out")
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        [rid] = self.run_ids(out)
        run_dir = os.path.join(out, "runs", rid)
        self.assertEqual(sorted(glob.glob(os.path.join(run_dir, "record.h5*"))), [os.path.join(run_dir, "record.h5")])
        r = record_of(run_dir)
        c = r["config"]
        global_batch = int(c["dist.world_size"]) * int(c["train.accum"]) * int(c["train.micro_batch"])
        self.assertEqual(global_batch, 16)
        logs = "".join(read_bytes(f).decode() for f in glob.glob(os.path.join(run_dir, "logs", "*.log")))
        # The script's own count: accumulation 4 over the world, 2 on each of 2 ranks.
        self.assertIn("tokens per iteration will be: %d" % (global_batch * 32), logs)

    def test_d_halving_replays_and_carries_through_an_edit(self):
        prog = self.program("halving")
        search = ("grid:\n  train.lr: [1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2]\n"
                  "search:\n  kind: halving\n  min_steps: 5\n  eta: 2\n  metric: final_eval_loss\n")
        grid = self.grid(prog, "halving", "steps: 20, eval_every: 5, threads: 1", search)
        one, two = os.path.join(self.tmp, "halving-1"), os.path.join(self.tmp, "halving-2")
        for out in (one, two):
            p = sweep("run", grid, "--out", out)
            self.assertEqual(p.returncode, 0, show(p))
        self.assertEqual(read_bytes(os.path.join(one, "search.log")), read_bytes(os.path.join(two, "search.log")))
        # Edit the main script (bare `train.py` in argv) and the model file.
        for name, old, new in (("train.py", 'print(f"iter {iter_num}', 'print(f"it {iter_num}'),
                               ("model.py", "return self.proj(", "return 1.0 * self.proj(")):
            path = os.path.join(prog, name)
            body = read_bytes(path).decode()
            self.assertIn(old, body)
            with open(path, "w") as f:
                f.write(body.replace(old, new, 1))
        p = sweep("run", grid, "--out", one)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("start over", p.stdout + p.stderr, show(p))
        now = {os.path.join(prog, n): "xxh3:" + xxhash.xxh3_64_hexdigest(read_bytes(os.path.join(prog, n)))
               for n in ("train.py", "model.py")}
        trials = 0
        for rid in self.run_ids(one):
            run_dir = os.path.join(one, "runs", rid)
            if not os.path.exists(os.path.join(run_dir, "record.h5")):
                continue
            trials += 1
            files = dict(reversed(item.split(" ", 1)) for item in
                         __import__("json").loads(record_of(run_dir)["env"]["program.files"]))
            for path, digest in now.items():
                self.assertEqual(files.get(path), digest, "%s: %s was not re-run on the new program" % (rid, path))
        self.assertEqual(trials, 4)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
