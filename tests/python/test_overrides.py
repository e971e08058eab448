#!/usr/bin/python3
"""Sweeps from the command line, with the real `sweep` and sweep-train: `sweep run
sweeps/quickstart.yaml train.lr=1e-3,3e-3 train.steps=50` runs 2 lr x 2 seeds of 50 steps,
the same command again skips them all, the grid as it ran (sweep-out/NAME/grid.yaml) plans
as the same runs, done, from anywhere, `sweep plan` takes the same overrides and --name,
`sweep reproduce` re-runs one bit for bit, and a value reaches the run as given, never
through a shell. Each bad override is refused with one line, exit 2, nothing written.

Usage: test_overrides.py [BIN_DIR] [unittest options]
"""

import os
import shutil
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_util  # noqa: E402
from cli_util import show  # noqa: E402

QUICKSTART = os.path.join(cli_util.ROOT, "sweeps", "quickstart.yaml")
ACCEPTANCE = ["train.lr=1e-3,3e-3", "train.steps=50"]


def run_config(path):
    """The run config sweep wrote, as {dotted key: text} of its sections' plain keys."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    return {s + "." + k: str(v) for s, keys in doc.items() for k, v in keys.items() if not isinstance(v, dict)}


def listing(top):
    """Every path under `top`, relative to it."""
    out = set()
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), top))
    return out


class Overrides(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sweep_overrides_")
        cls.out = os.path.join(cls.tmp, "sweep-out", "quickstart")
        cls.first = cls.sweep("run", QUICKSTART, *ACCEPTANCE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def sweep(cls, *args):
        return cli_util.run([os.path.join(cli_util.BIN_DIR, "sweep")] + list(args), cwd=cls.tmp)

    def run_configs(self):
        runs = os.path.join(self.out, "runs")
        return {i: run_config(os.path.join(runs, i, "config.yaml")) for i in os.listdir(runs)}

    def test_runs_two_lr_by_two_seeds_of_fifty_steps(self):
        p = self.first
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("sweep quickstart: 4 completed, 0 already done, 0 failed", p.stdout, show(p))
        configs = self.run_configs()
        self.assertEqual(len(configs), 4)
        self.assertEqual({c["train.steps"] for c in configs.values()}, {"50"})
        self.assertEqual(sorted((float(c["train.lr"]), c["train.seed"]) for c in configs.values()),
                         [(1e-3, "0"), (1e-3, "1"), (3e-3, "0"), (3e-3, "1")])

    def test_the_same_command_again_skips_them_all(self):
        p = self.sweep("run", QUICKSTART, *ACCEPTANCE)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("sweep quickstart: 0 completed, 4 already done, 0 failed", p.stdout, show(p))

    def test_plan_takes_the_same_overrides(self):
        p = self.sweep("plan", QUICKSTART, *ACCEPTANCE)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("sweep quickstart: 4 runs in sweep-out/quickstart (4 done, 0 to run)", p.stdout, show(p))
        # Without them, the grid file's own points: none of them ran.
        p = self.sweep("plan", QUICKSTART)
        self.assertIn("(0 done, 4 to run)", p.stdout, show(p))

    def test_the_grid_as_it_ran_is_kept_and_plans_as_the_same_runs_from_anywhere(self):
        grid = os.path.join(self.out, "grid.yaml")
        with open(grid) as f:
            text = f.read()
        self.assertIn("with train.lr=1e-3,3e-3 train.steps=50", text.splitlines()[0])
        self.assertIn("train.lr: [1e-3, 3e-3]", text)
        self.assertIn("steps: 50", text)
        elsewhere = tempfile.mkdtemp(prefix="sweep_overrides_copy_")
        try:
            shutil.copy(grid, os.path.join(elsewhere, "grid.yaml"))
            p = self.sweep("plan", os.path.join(elsewhere, "grid.yaml"), "--out", self.out)
        finally:
            shutil.rmtree(elsewhere)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("4 runs in %s (4 done, 0 to run)" % self.out, p.stdout, show(p))

    def test_name_names_the_sweep_and_its_directory(self):
        p = self.sweep("plan", QUICKSTART, "train.steps=50", "--name", "lr-study")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("sweep lr-study: 4 runs in sweep-out/lr-study (0 done, 4 to run)", p.stdout, show(p))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "sweep-out", "lr-study")))  # plan writes nothing

    def test_reproduce_re_runs_what_ran(self):
        run = sorted(os.listdir(os.path.join(self.out, "runs")))[0]
        p = self.sweep("reproduce", os.path.join(self.out, "runs", run))
        self.assertEqual(p.returncode, 0, show(p))

    def test_a_value_reaches_the_run_as_given_never_through_a_shell(self):
        name = "a b;$(touch pwned)'x.bin"
        with open(os.path.join(self.tmp, name), "wb") as f:
            f.write(bytes(range(32, 127)) * 700)
        p = self.sweep("run", QUICKSTART, "data.kind=text", "data.path=" + name, "train.lr=choice(1e-3)",
                       "train.seed=choice(0)", "train.steps=12", "--name", "text")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "pwned")))
        runs = os.path.join(self.tmp, "sweep-out", "text", "runs")
        (run,) = os.listdir(runs)
        config = run_config(os.path.join(runs, run, "config.yaml"))
        self.assertEqual(config["data.path"], os.path.join(self.tmp, name))  # relative to where it was typed

    def test_each_bad_override_is_refused_with_one_line_and_nothing_written(self):
        grid_line = QUICKSTART + ":20:3"  # train.lr in grid:
        cases = [
            (["train.lrr=1e-3"], "override 'train.lrr=1e-3': unknown key 'train.lrr' (did you mean 'train.lr'?)"),
            (["train.steps=fifty"], "override 'train.steps=fifty': key 'train.steps': expected an integer"),
            (["train.steps=0"], "override 'train.steps=0': key 'train.steps': expected an integer in [1, "),
            (["train.clip_norm=-1"], "override 'train.clip_norm=-1': key 'train.clip_norm'"),
            (["train.lr=1e-3"], "override 'train.lr=1e-3': key 'train.lr' is an axis of the grid (grid at %s)"
             % grid_line),
            (["train.steps="], "override 'train.steps=': no value after '='"),
            (["=50"], "override '=50': no key before '='"),
            (["train.steps=range(1,x)"], "override 'train.steps=range(1,x)': key 'train.steps.range': expected a "
             "number, got 'x'"),
            (["train.steps=50", "train.steps=60"], "override 'train.steps=60': key 'train.steps' is given twice"),
        ]
        fresh = tempfile.mkdtemp(prefix="sweep_overrides_bad_")
        try:
            for verb in ("run", "plan"):
                for args, want in cases:
                    p = cli_util.run([os.path.join(cli_util.BIN_DIR, "sweep"), verb, QUICKSTART] + args, cwd=fresh)
                    self.assertEqual(p.returncode, 2, show(p))
                    self.assertEqual(p.stderr.count("\n"), 1, show(p))
                    self.assertIn("sweep: error: " + want, p.stderr, show(p))
                    self.assertEqual(p.stdout, "", show(p))
                    self.assertEqual(listing(fresh), set(), (verb, args))
        finally:
            shutil.rmtree(fresh)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
