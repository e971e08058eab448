#!/usr/bin/python3
"""`sweep plan` of a 1,000,000-point grid holds a few dozen bytes a point, not the points:
its peak resident memory (the kernel's count for the finished child, getrusage) stays
under 300 MB, where keeping every point's config took about 1.2 GB. Memory, unlike time,
does not depend on how busy the machine is. Also checks the table itself: one row per
point in expansion order (seeds fastest), only the varying columns, every id distinct.

Usage: test_plan_memory.py [BIN_DIR] [unittest options]
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
LIMIT_MB = 300


class PlanMemory(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="plan_memory.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_million_points_plan_in_under_300_mb(self):
        grid = os.path.join(self.tmp, "big.yaml")
        lrs = ", ".join("%.6g" % (1e-4 * (1 + i)) for i in range(1000))
        with open(grid, "w") as f:
            f.write("name: big\n"
                    "base:\n"
                    "  model: {layers: 1, d_model: 16, heads: 2, vocab: 64, seq_len: 8}\n"
                    "  train: {steps: 10, micro_batch: 2, weight_decay: 0.0}\n"
                    "grid:\n"
                    "  train.lr: [%s]\n"
                    "  train.weight_decay: [0.0]\n"  # swept, but the same everywhere: no column
                    "seeds: 1000\n" % lrs)
        table = os.path.join(self.tmp, "plan.txt")
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        with open(table, "w") as out:
            p = subprocess.run([os.path.join(BIN_DIR, "sweep"), "plan", grid, "--out",
                                os.path.join(self.tmp, "none")],
                               stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        self.assertEqual(p.returncode, 0, p.stderr)
        # ru_maxrss of the children is the largest of any child waited for: this one
        # is the only child, and no earlier one came near.
        self.assertGreater(peak_kb, before)
        print("sweep plan, 1,000,000 points: peak resident memory %.0f MB" % (peak_kb / 1024))
        self.assertLessEqual(peak_kb, LIMIT_MB * 1024,
                             "sweep plan of 1,000,000 points peaked at %.0f MB" % (peak_kb / 1024))

        with open(table) as f:
            lines = f.read().splitlines()
        self.assertIn("sweep big: 1000000 runs in", lines[0])
        self.assertIn("(0 done, 1000000 to run)", lines[0])
        header = [i for i, l in enumerate(lines) if l.startswith("id ")]
        self.assertEqual(len(header), 1, lines[:5])
        h = header[0]
        self.assertEqual(lines[h].split(), ["id", "state", "cores", "train.lr", "train.seed"])
        rows = [l.split() for l in lines[h + 1:h + 1 + 1000000]]
        self.assertEqual(len(rows), 1000000)
        self.assertEqual(rows[0][1:], ["pending", "1", "0.0001", "0"])
        self.assertEqual(rows[999][1:], ["pending", "1", "0.0001", "999"])
        self.assertEqual(rows[1000][1:], ["pending", "1", "0.0002", "0"])
        self.assertEqual(rows[-1][1:], ["pending", "1", "0.1", "999"])
        self.assertEqual(len({r[0] for r in rows}), 1000000, "run ids are not distinct")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
