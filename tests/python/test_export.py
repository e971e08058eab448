#!/usr/bin/python3
"""`sweep export --format csv` read back by pandas (Debian's python3-pandas, no project
code): every per-step metric and every held-out loss of every run, as recorded (h5py reads
the records for the comparison); -o refuses to replace a file that is not an export.

Usage: test_export.py [BIN_DIR] [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import pandas as pd
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


class Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="export_test.")
        g = {"name": "export",
             "base": {"model": {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16},
                      "data": {"eval_fraction": 0.01},
                      "train": {"steps": 6, "micro_batch": 2, "eval_every": 3, "eval_batches": 1}},
             "grid": {"train.lr": [1.0e-3, 3.0e-3], "train.seed": [0, 1]}}
        cls.grid = os.path.join(cls.tmp, "grid.yaml")
        with open(cls.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        cls.out = os.path.join(cls.tmp, "out")
        p = cls.sweep("run", cls.grid, "--out", cls.out, "--quiet")
        assert p.returncode == 0, show(p)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def sweep(cls, *args):
        return subprocess.run([os.path.join(BIN_DIR, "sweep")] + list(args), capture_output=True, text=True,
                              timeout=300)

    def test_pandas_reads_every_recorded_value(self):
        p = self.sweep("export", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        # round_trip: pandas' default float parser may miss the last bit of a 17-digit number.
        d = pd.read_csv(os.path.join(self.out, "export.csv"), dtype={"run_id": str}, float_precision="round_trip")
        self.assertEqual(list(d.columns), ["run_id", "status", "train.lr", "train.seed", "step", "metric", "value"])
        runs = sorted(os.listdir(os.path.join(self.out, "runs")))
        self.assertEqual(sorted(d["run_id"].unique()), runs)
        for rid in runs:
            mine = d[d["run_id"] == rid]
            with h5py.File(os.path.join(self.out, "runs", rid, "record.h5"), "r") as f:
                for metric in ("loss", "lr", "grad_norm", "clip_coef", "loss_scale", "step_time_s", "tokens_per_s",
                               "skipped", "tokens"):
                    col = mine[mine["metric"] == metric].sort_values("step")
                    self.assertEqual(list(col["step"]), list(f["metrics/step"][:]), metric)
                    # 17 significant digits: the very doubles the record holds.
                    np.testing.assert_array_equal(col["value"].to_numpy(), f["metrics/" + metric][:].astype(float),
                                                  err_msg=f"{rid} {metric}")
                ev = mine[mine["metric"] == "eval_loss"].sort_values("step")
                self.assertEqual(list(ev["step"]), [3, 6])
                np.testing.assert_array_equal(ev["value"].to_numpy(), f["eval/loss"][:])
                lr = f["config/values"][list(f["config/keys"][:]).index(b"train.lr")].decode()
            self.assertEqual(set(mine["train.lr"]), {float(lr)})
            self.assertEqual(set(mine["status"]), {"completed"})
        # Long format pivots into one column per metric.
        wide = d.pivot_table(index=["run_id", "step"], columns="metric", values="value")
        self.assertEqual(len(wide), 4 * 6)

    def test_stdout_and_refusing_a_foreign_file(self):
        p = self.sweep("export", self.out, "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(p.stdout.startswith("run_id,status,"), p.stdout[:100])
        foreign = os.path.join(self.tmp, "notes.csv")
        with open(foreign, "w") as f:
            f.write("mine\n")
        p = self.sweep("export", self.out, "-o", foreign)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("exists and is not a sweep export (CSV); refusing to replace it", p.stderr)
        with open(foreign) as f:
            self.assertEqual(f.read(), "mine\n")
        p = self.sweep("export", self.out, "--format", "parquet")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("--format 'parquet': expected csv", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
