#!/usr/bin/python3
"""Timing metrics end to end (results/analysis/timing_metrics.h): a Python program run by
`sweep run` records `mfu`, a figure of its own from the wall clock, which no re-run
shares bit for bit.

- Declared by the program (`run.declare_timing("mfu")`): `sweep reproduce` exits 0, says
  bit-for-bit and names mfu among the timing metrics shown apart; `sweep compare` of the
  two records agrees.
- Not declared: the same program's reproduce exits 1 naming mfu (so the test can fail).
- Declared by the grid (`program.timing_metrics: [mfu]`): exits 0 as well, and the re-run
  is given the declaration again.
- A grid that declares one of the record's own columns (loss) is exit 2.

Usage: test_timing_metrics.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import os
import shutil
import sys
import tempfile
import unittest

import h5py
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402

# The verdict corpus's program: linear regression in float32 (the same bits every run, one
# thread) and its "MFU", the step's floating-point operations over its wall time, which is
# never the same twice. Its key `declare` (api, none) says whether it declares mfu timing.
PROGRAM = os.path.join(cli_util.ROOT, "tests", "verdict_corpus", "timing_metric_program", "train.py")


def grid(script, name, declare, timing_metrics=None):
    program = {"argv": ["/usr/bin/python3", script], "kind": "timing-lr", "pass_args": False,
               "keys": {"declare": {"type": "choice", "default": "none", "choices": ["api", "none"]}}}
    if timing_metrics is not None:
        program["timing_metrics"] = timing_metrics
    return {"name": name, "program": program, "base": {"train": {"steps": 20, "threads": 1, "lr": 0.05}},
            "grid": {"model.declare": declare}}


class TimingMetrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="timing_metrics_test.")
        cls.script = PROGRAM
        cls.out = {}
        for name, g in (("api", grid(cls.script, "by-program", ["api", "none"])),
                        ("grid", grid(cls.script, "by-grid", ["none"], ["mfu"]))):
            path = os.path.join(cls.tmp, name + ".yaml")
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(g, f, sort_keys=False)
            cls.out[name] = os.path.join(cls.tmp, name)
            p = sweep("run", path, "--out", cls.out[name])
            assert p.returncode == 0, show(p)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def run_dir(self, sweep_name, declare):
        runs = os.path.join(self.out[sweep_name], "runs")
        for rid in sorted(os.listdir(runs)):
            with open(os.path.join(runs, rid, "config.yaml"), encoding="utf-8") as f:
                if yaml.safe_load(f)["model"]["declare"] == declare:
                    return os.path.join(runs, rid)
        self.fail(f"no run with model.declare {declare} in {runs}")

    def assert_reproduced_with_mfu_apart(self, p):
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 20 steps, 5 checksums", p.stdout, show(p))
        prefix = "timing metrics (not compared bit for bit), means: "
        line = [ln for ln in p.stdout.splitlines() if ln.startswith(prefix)]
        self.assertEqual(len(line), 1, show(p))
        means = dict(m.split(" ", 1) for m in line[0][len(prefix):].split(", "))
        self.assertRegex(means.get("mfu", ""), r"^[0-9.e+-]+ vs [0-9.e+-]+$", line[0])
        self.assertIn("step_time_s", means, line[0])  # the built-in ones, by the same rule

    def test_declared_by_the_program_it_reproduces_bit_for_bit(self):
        run_dir = self.run_dir("api", "api")
        with h5py.File(os.path.join(run_dir, "record.h5"), "r") as f:
            self.assertEqual(f["summary"].attrs["timing_metrics"], "mfu")
            mfu = f["metrics/extra/mfu"][:]
        self.assertTrue((mfu > 0).all(), mfu)
        p = sweep("reproduce", run_dir)
        self.assert_reproduced_with_mfu_apart(p)
        again = os.path.join(run_dir, "reproduce", "1")
        with h5py.File(os.path.join(again, "record.h5"), "r") as f:
            self.assertFalse((f["metrics/extra/mfu"][:] == mfu).all(), "the clock gave the re-run the same bits")
        p = sweep("compare", run_dir, again)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("identical bit-for-bit: 20 steps, 5 checksums", p.stdout, show(p))
        self.assertIn("timing metrics (not compared bit for bit), means: mfu ", p.stdout, show(p))

    def test_not_declared_the_clock_makes_it_differ(self):
        p = sweep("reproduce", self.run_dir("api", "none"))
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("training identical bit-for-bit (20 steps, 5 checksums), but the program's own metric mfu "
                      "differs at step 1", p.stdout, show(p))
        self.assertNotRegex(p.stdout, r"timing metrics \(not compared bit for bit\).*\bmfu\b")

    def test_declared_by_the_grid_it_reproduces_bit_for_bit(self):
        run_dir = self.run_dir("grid", "none")
        with h5py.File(os.path.join(run_dir, "record.h5"), "r") as f:
            self.assertEqual(f["environment"].attrs["program.timing_metrics"], "mfu")
            self.assertNotIn("timing_metrics", f["summary"].attrs)
        p = sweep("reproduce", run_dir)
        self.assert_reproduced_with_mfu_apart(p)
        with h5py.File(os.path.join(run_dir, "reproduce", "1", "record.h5"), "r") as f:
            self.assertEqual(f["environment"].attrs["program.timing_metrics"], "mfu", "declared to the re-run too")

    def test_a_grid_cannot_declare_the_records_own_math_timing(self):
        path = os.path.join(self.tmp, "loss.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(grid(self.script, "loss", ["none"], ["mfu", "loss"]), f, sort_keys=False)
        p = sweep("plan", path)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("key 'program.timing_metrics': 'loss': one of the record's own columns", p.stderr, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
