#!/usr/bin/python3
"""Staleness of a grid's program that never strands a sweep, driven through the real
`sweep` binary with a small PyTorch script (a least-squares fit, a few steps) that uses
python/sweep:

a. `argv: [python3, train.py]`: the bare script name is the script in the run's directory
   (program.cwd), hashed into the record's program.files, so editing it makes the runs
   stale, and `sweep run` trains them again;
b. a finished halving search, its script edited, run again: every trial (stopped at a
   rung or finished) starts over on the new script with no manual step, its record and
   checkpoints kept aside, one line says so, and search.log and the records are those of
   the same search started afresh on the new script;
c. `sweep accept DIR --files train.py` after a comment-only edit: plan says done, run
   skips the runs, plan and status show the acceptance, and DIR/accepted-changes holds it;
   a later edit makes them stale again; bad input (not a sweep directory, a file of no
   run's program, nothing to accept) exits 2 with one line and writes nothing.

Usage: test_program_staleness.py [BIN_DIR] [unittest options]
"""

import os
import re
import shutil
import sys
import tempfile
import unittest

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, show, sweep  # noqa: E402

SCRIPT = '''#!/usr/bin/python3
"""A least-squares fit sweep drives: its own settings, sweep's API for the record."""
import torch

import sweep

settings = {"lr": 0.05, "steps": 8, "seed": 0, "width": 4}
run = sweep.init(settings)
torch.manual_seed(settings["seed"])
torch.set_num_threads(1)
x = torch.randn(64, settings["width"])
y = x @ torch.arange(1.0, settings["width"] + 1)
model = torch.nn.Linear(settings["width"], 1)
optimizer = torch.optim.SGD(model.parameters(), lr=settings["lr"] * SCALE)
start = run.resume(model, optimizer) + 1
run.watch(model)
for step in range(start, settings["steps"] + 1):
    loss = ((model(x).squeeze(-1) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    run.log(step, loss.item(), lr=settings["lr"], tokens=64)
    if run.should_stop(step):
        run.checkpoint(step, model, optimizer)
        break
run.finish()
'''

GRID = """name: fit
program:
  argv: [/usr/bin/python3, train.py]
  pass_args: false
  stop: true
  kind: fit
  keys:
    width: {type: int, default: 4, min: 1, max: 64}
launch: {parallel: 2}
base:
  train: {steps: 8, threads: 1, checksum_every: 2}
grid:
  train.lr: [0.01, 0.02, 0.05, 0.1]
"""

HALVING = "search:\n  kind: halving\n  min_steps: 2\n  eta: 2\n"


def program_file_hash(record, path):
    """The hash the record's program.files holds for `path`, or None."""
    with h5py.File(record, "r") as f:
        v = f["environment"].attrs["program.files"]
    text = v.decode() if isinstance(v, bytes) else str(v)
    for item in re.findall(r'"([^"]*)"', text):
        h, p = item.split(" ", 1)
        if p == path:
            return h
    return None


class ProgramStaleness(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="program_staleness_test.")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.script = os.path.join(self.tmp, "train.py")
        self.write_script(scale="1.0")

    def write_script(self, scale, tail=""):
        with open(self.script, "w", encoding="utf-8") as f:
            f.write(SCRIPT.replace("SCALE", scale) + tail)

    def grid(self, name, search=""):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(GRID + search)
        return path

    def sweep_ok(self, *args):
        p = sweep(*args)
        self.assertEqual(p.returncode, 0, show(p))
        return p

    def run_ids(self, out):
        return sorted(os.listdir(os.path.join(out, "runs")))

    # --- a. a bare script name in argv is the script

    def test_a_editing_a_bare_named_script_makes_its_runs_stale(self):
        grid, out = self.grid("plain.yaml"), os.path.join(self.tmp, "plain")
        self.sweep_ok("run", grid, "--out", out, "--quiet")
        ids = self.run_ids(out)
        self.assertEqual(len(ids), 4)
        for rid in ids:
            self.assertIsNotNone(program_file_hash(os.path.join(out, "runs", rid, "record.h5"), self.script))
        self.write_script(scale="1.0", tail="# an edit\n")
        p = self.sweep_ok("plan", grid, "--out", out)
        self.assertIn("(0 done, 4 to run)", p.stdout, show(p))
        self.assertRegex(p.stdout, r"stale %s: its program file %s \(was xxh3:\w+, now xxh3:\w+\) changed since the run"
                         % (ids[0], re.escape(self.script)), show(p))
        p = self.sweep_ok("run", grid, "--out", out, "--quiet")
        self.assertIn("4 completed, 0 already done, 0 failed", p.stdout, show(p))
        p = self.sweep_ok("plan", grid, "--out", out)
        self.assertIn("(4 done, 0 to run)", p.stdout, show(p))

    # --- b. a halving search run again after its program changed

    def test_b_a_search_run_again_after_an_edit_restarts_every_changed_trial(self):
        grid = self.grid("halving.yaml", HALVING)
        out = os.path.join(self.tmp, "search")
        self.sweep_ok("run", grid, "--out", out, "--quiet")
        with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
            before = f.read()
        self.assertIn("done", before)
        self.assertIn(" stopped\n", before)  # trials stopped at a rung: they go stale too
        old = read_bytes(self.script)
        self.write_script(scale="0.5")  # trains other bits
        p = self.sweep_ok("run", grid, "--out", out, "--quiet")
        self.assertEqual(p.stderr.count("changed since"), 1, show(p))
        self.assertIn("sweep: train.py changed since 4 of 4 trials ran: they start over from step 0 "
                      "(their records and checkpoints are kept aside)\n", p.stderr, show(p))
        self.assertNotEqual(read_bytes(self.script), old)
        # Every record the search reads, and every rung record a resumed run carried its
        # rows on from, is of the new script; the old ones are kept aside.
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(4 done, 0 to run)", p.stdout, show(p))
        self.assertNotRegex(p.stdout, r"(?m)^stale ", show(p))
        now = None
        for rid in self.run_ids(out):
            d = os.path.join(out, "runs", rid)
            h = program_file_hash(os.path.join(d, "record.h5"), self.script)
            now = now or h
            self.assertEqual(h, now, rid)
            names = os.listdir(d)
            self.assertEqual(len([n for n in names if n.startswith("checkpoints.stale-")]), 1, names)
            self.assertTrue(any(n.startswith("record.h5.stale-") for n in names), names)
            for n in names:
                if n.startswith("record.h5.stopped-"):
                    self.assertEqual(program_file_hash(os.path.join(d, n), self.script), now, n)
        # The same search started afresh on the new script decides and records the same.
        fresh = os.path.join(self.tmp, "fresh")
        self.sweep_ok("run", grid, "--out", fresh, "--quiet")
        with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
            replayed = f.read()
        with open(os.path.join(fresh, "search.log"), encoding="utf-8") as f:
            self.assertEqual(replayed, f.read())
        self.assertNotEqual(replayed, before)
        p = self.sweep_ok("compare", out, fresh)
        self.assertIn("4 pairs: 4 identical", p.stdout, show(p))
        # Once more: nothing changed, nothing runs, nothing is said.
        p = self.sweep_ok("run", grid, "--out", out, "--quiet")
        self.assertIn("0 completed, 4 already done", p.stdout, show(p))
        self.assertNotIn("changed since", p.stderr, show(p))

    # --- c. sweep accept

    def test_c_an_accepted_comment_only_change_keeps_runs_done(self):
        grid, out = self.grid("accept.yaml"), os.path.join(self.tmp, "accept")
        self.sweep_ok("run", grid, "--out", out, "--quiet")
        ids = self.run_ids(out)
        was = program_file_hash(os.path.join(out, "runs", ids[0], "record.h5"), self.script)
        self.write_script(scale="1.0", tail="# a comment, nothing else\n")
        accepted = os.path.join(out, "accepted-changes")

        # Bad input: one line, exit 2, nothing written.
        for args, said in [
            ([self.tmp, "--files", "train.py"], "not a sweep directory (no runs/ in it)"),
            ([out, "--files", "accept.yaml"], "not a file of any run's program in"),
            ([out, "--files", "train.py", "no-such.py"], "'no-such.py'"),
        ]:
            p = sweep("accept", *args)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertEqual(p.stderr.count("\n"), 1, show(p))
            self.assertIn(said, p.stderr, show(p))
            self.assertFalse(os.path.exists(accepted), show(p))
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "accepted-changes")))

        # train.py relative to the current directory (from elsewhere, the end of the one
        # recorded path it matches would do too).
        p = cli_util.run([os.path.join(cli_util.BIN_DIR, "sweep"), "accept", out, "--files", "train.py"], cwd=self.tmp)
        self.assertEqual(p.returncode, 0, show(p))
        line = re.match(r"accepted: %s \(4 runs, hash %s -> (xxh3:\w+), at \S+Z\)\n$"
                        % (re.escape(self.script), was), p.stdout)
        self.assertTrue(line, show(p))
        now = line.group(1)
        with open(accepted, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "sweep-accepted-changes 1")
        self.assertEqual(len(lines), 2)
        self.assertIn('"%s", "%s", "%s", "4"]' % (self.script, was, now), lines[1])

        p = self.sweep_ok("plan", grid, "--out", out)
        self.assertIn("(4 done, 0 to run)", p.stdout, show(p))
        self.assertIn(line.group(0), p.stdout, show(p))
        p = self.sweep_ok("status", out)
        self.assertIn("4 runs: 4 completed", p.stdout, show(p))
        self.assertIn(line.group(0), p.stdout, show(p))
        p = self.sweep_ok("run", grid, "--out", out, "--quiet")
        self.assertIn("0 completed, 4 already done", p.stdout, show(p))

        # Nothing left to accept: exit 2, the file as it was. (The file named as a grid file
        # elsewhere would name it: the end of the one recorded path that ends so.)
        before = read_bytes(accepted)
        grid_style = os.path.join("..", os.path.basename(self.tmp), "train.py")
        p = cli_util.run([os.path.join(cli_util.BIN_DIR, "sweep"), "accept", out, "--files", grid_style], cwd=HERE)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("(%s): every run that holds it recorded (or accepted) its hash now" % self.script, p.stderr,
                      show(p))
        self.assertIn("nothing to accept", p.stderr, show(p))
        self.assertEqual(read_bytes(accepted), before)

        # A later change is a change again, said with what was accepted.
        self.write_script(scale="0.5", tail="# a comment, nothing else\n")
        p = self.sweep_ok("plan", grid, "--out", out)
        self.assertIn("(0 done, 4 to run)", p.stdout, show(p))
        self.assertIn("(was %s, accepted as %s, now xxh3:" % (was, now), p.stdout, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
