#!/usr/bin/python3
"""A sweep in progress, watched as a user would, with the real `sweep` and sweep-train: a
slow run (fault.slow_ms) is followed in its rank log line by line while it trains, `sweep
status` shows its step of total, its latest loss and how long it has run, read from the
partial record without disturbing the writer, and h5py reads the same partial record
without taking its lock (results/SCHEMA.md). A run one of whose ranks is stopped (SIGSTOP)
shows "no progress for N s" once its record has not advanced for 30 s, and stops showing
it when the rank goes on (results/analysis/stall.h).

Usage: test_live_status.py [BIN_DIR] [unittest options]
"""

import json
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


def sweep(*args):
    return subprocess.run([os.path.join(BIN_DIR, "sweep")] + list(args), capture_output=True, text=True, timeout=60)


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


MODEL = {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16}


def rank_pid(out, rank):
    """The pid of the sweep-train of rank `rank` (mpiexec's) training under sweep directory
    `out`, or None."""
    want = b"\0OMPI_COMM_WORLD_RANK=%d\0" % rank
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
            # sweep-train itself, not sweep-rank, its supervisor, whose arguments name it
            if not cmd.split(b"\0")[0].endswith(b"sweep-train") or out.encode() not in cmd:
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if want in b"\0" + f.read():
                    return int(pid)
        except OSError:
            continue  # gone meanwhile, or not ours
    return None


class LiveStatus(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="live_status_test.")
        self.out = os.path.join(self.tmp, "out")
        self.driver = None
        self.stopped = None

    def start(self, base, launch=None):
        g = {"name": "live", "base": base}
        if launch:
            g["launch"] = launch
        self.grid = os.path.join(self.tmp, "grid.yaml")
        with open(self.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        self.driver = subprocess.Popen([os.path.join(BIN_DIR, "sweep"), "run", self.grid, "--out", self.out],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def tearDown(self):
        if self.stopped:
            try:
                os.kill(self.stopped, signal.SIGCONT)  # so that the driver's SIGTERM can end it
            except OSError:
                pass
        if self.driver and self.driver.poll() is None:
            self.driver.send_signal(signal.SIGTERM)
            self.driver.wait(timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def status(self):
        return subprocess.run([os.path.join(BIN_DIR, "sweep"), "status", self.out], capture_output=True, text=True,
                              timeout=60)

    def wait_for(self, what, check, timeout=60, every=0.1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = check()
            if got:
                return got
            self.assertIsNone(self.driver.poll(), "the sweep ended before " + what)
            time.sleep(every)
        self.fail("no " + what + " within %d s" % timeout)

    def test_a_running_run_is_watched(self):
        self.start({"model": MODEL, "train": {"steps": STEPS, "micro_batch": 2, "log_every": 1},
                    "fault": {"slow_ms": 150}})  # about 10 s in all: long enough to watch
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
            p = self.status()
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

        self.assertNotIn("no progress", p.stdout, show(p))

        # The reader disturbed nothing: the run completes.
        self.assertEqual(self.driver.wait(timeout=120), 0)
        self.assertTrue(os.path.exists(os.path.join(runs, rid, "record.h5")))

    def test_a_run_whose_rank_is_stopped_shows_no_progress(self):
        # Two ranks, rank 0 sleeping 100 ms in each step: some 20 s of training, and a
        # dist.timeout_s far beyond the test, so that only the test ends the stall.
        steps = 200
        self.start({"model": MODEL, "train": {"steps": steps, "micro_batch": 2, "log_every": 1},
                    "dist": {"world_size": 2, "timeout_s": 900}, "fault": {"slow_ms": 100, "slow_rank": 0}},
                   launch={"slots": 2})

        def progress(p):
            m = re.search(r"step (\d+)/%d, loss [^,]+, (no progress for (\d+) s, )?(\d+m)?\d+s into attempt 1" % steps,
                          p.stdout)
            return m and (int(m.group(1)), int(m.group(3)) if m.group(3) else None)

        def advancing():
            p = self.status()
            got = progress(p)
            return got and got[0] >= 3 and p

        p = self.wait_for("a step past 2 in sweep status", advancing, timeout=120)
        self.assertIsNone(progress(p)[1], "a run that advances makes progress:\n" + show(p))
        pid = self.wait_for("rank 1's process", lambda: rank_pid(self.out, 1), timeout=30)
        os.kill(pid, signal.SIGSTOP)
        self.stopped = pid

        # Rank 0 now waits in a collective for ever: the record stops advancing, and after
        # 30 s (the least threshold; these steps are short) status says for how long.
        def stalled():
            p = self.status()
            got = progress(p)
            return got and got[1] is not None and (got, p)

        (step, seconds), p = self.wait_for("'no progress for' in sweep status", stalled, timeout=150, every=1)
        self.assertGreaterEqual(seconds, 30, show(p))
        self.assertLess(step, steps, show(p))
        self.assertIn("1 runs: 1 running", p.stdout, show(p))
        time.sleep(2)  # a little later it is still stalled, at the same step, for longer
        p = self.status()
        self.assertEqual(progress(p)[0], step, show(p))
        self.assertGreaterEqual(progress(p)[1], seconds, show(p))
        # The other readers say it in the same words: show of the run, and the report's
        # running run (markdown and JSON), by the same rule (results/analysis/stall.h).
        rid = os.listdir(os.path.join(self.out, "runs"))[0]
        p = sweep("show", os.path.join(self.out, "runs", rid))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertRegex(p.stdout, r"\nprogress: +step %d of %d, no progress for \d+ s\n" % (step, steps), show(p))
        p = sweep("report", self.out, "--format", "json", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        (running,) = [f for f in json.loads(p.stdout)["failed"] if f["run_id"] == rid]
        self.assertEqual(running["status"], "running", running)
        self.assertRegex(running["cause"], r"^running: step %d of %d, loss [^,]+, no progress for \d+ s$" % (step, steps))
        p = sweep("report", self.out, "--format", "md", "-o", "-")
        self.assertRegex(p.stdout, r"step %d of %d, loss [^,]+, no progress for \d+ s" % (step, steps), show(p))

        # Going on, the run advances again, says nothing of a stall, and completes.
        os.kill(pid, signal.SIGCONT)
        self.stopped = None

        def moving():
            p = self.status()
            got = progress(p)
            return (got and got[0] > step and got[1] is None) or self.driver.poll() is not None

        self.wait_for("the run advancing again", moving, timeout=120, every=0.5)
        self.assertEqual(self.driver.wait(timeout=300), 0)
        self.assertTrue(os.path.exists(os.path.join(self.out, "runs", os.listdir(os.path.join(self.out, "runs"))[0],
                                                    "record.h5")))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
