#!/usr/bin/python3
"""A sweep in progress, watched as a user would, with the real `sweep` and sweep-train: a
slow run (fault.slow_ms) is followed in its rank log line by line while it trains, `sweep
status` shows its step of total, its latest loss and how long it has run, read from the
partial record without disturbing the writer, and h5py reads the same partial record
without taking its lock (results/SCHEMA.md).

Usage: test_live_status.py [BIN_DIR] [unittest options]
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
STEPS = 60


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


class LiveStatus(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="live_status_test.")
        g = {"name": "live",
             "base": {"model": {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16},
                      "train": {"steps": STEPS, "micro_batch": 2, "log_every": 1},
                      "fault": {"slow_ms": 150}}}  # about 10 s in all: long enough to watch
        self.grid = os.path.join(self.tmp, "grid.yaml")
        with open(self.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        self.out = os.path.join(self.tmp, "out")
        self.driver = subprocess.Popen([os.path.join(BIN_DIR, "sweep"), "run", self.grid, "--out", self.out],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def tearDown(self):
        if self.driver.poll() is None:
            self.driver.send_signal(signal.SIGTERM)
            self.driver.wait(timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def wait_for(self, what, check, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = check()
            if got:
                return got
            self.assertIsNone(self.driver.poll(), "the sweep ended before " + what)
            time.sleep(0.1)
        self.fail("no " + what + " within %d s" % timeout)

    def test_a_running_run_is_watched(self):
        runs = os.path.join(self.out, "runs")
        rid = self.wait_for("run directory", lambda: os.path.isdir(runs) and os.listdir(runs) and os.listdir(runs)[0])
        log = os.path.join(runs, rid, "logs", "rank0.log")

        def step_lines():
            try:
                with open(log, encoding="utf-8", errors="replace") as f:
                    return re.findall(r"(?m)^step\s+(\d+)\s+loss", f.read())
            except FileNotFoundError:
                return []

        # The rank log has step lines while the run is still training: line-buffered.
        lines = self.wait_for("step line in rank0.log", lambda: len(step_lines()) >= 3 and step_lines())
        # Block-buffered output would arrive some 45 lines at a time (a 4 KiB buffer).
        self.assertLessEqual(int(lines[-1]), 10, "the log's lines arrived in a block, not as written")
        self.assertIsNone(self.driver.poll())

        # sweep status: step of total, the latest loss and the time, from the partial record.
        def status():
            p = subprocess.run([os.path.join(BIN_DIR, "sweep"), "status", self.out], capture_output=True, text=True,
                               timeout=60)
            m = re.search(r"step (\d+)/%d, loss [\d.e+-]+, (\d+m)?\d+s into attempt 1" % STEPS, p.stdout)
            return m and 0 < int(m.group(1)) < STEPS and p

        p = self.wait_for("step/total in sweep status", status, timeout=30)
        self.assertIn("running", p.stdout, show(p))
        self.assertIn("1 runs: 1 running", p.stdout, show(p))

        # h5py reads the partial record while it is written, without its lock.
        partial = os.path.join(runs, rid, "record.h5.partial")
        with h5py.File(partial, "r", locking=False) as f:
            steps = f["metrics/step"][()]
            self.assertEqual(f.attrs["status"], "running")
        self.assertGreater(len(steps), 0)
        self.assertIsNone(self.driver.poll(), "the run should still be training")

        # The reader disturbed nothing: the run completes.
        self.assertEqual(self.driver.wait(timeout=120), 0)
        self.assertTrue(os.path.exists(os.path.join(runs, rid, "record.h5")))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
