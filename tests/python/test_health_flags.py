#!/usr/bin/python3
"""Health flags through the real trainer and `sweep`: runs that complete yet went wrong
raise their flag, stored in the record's /summary (`health`, `health.<flag>`, read here
with h5py) and shown by the trainer's end-of-run lines, the driver's line for the run,
`sweep status` and the report; the quickstart grid raises none.

  - fp16 with a loss scale so large that every step overflows: skipped_steps
  - train.lr 10 on the default synthetic data: the loss ends above its start (loss_rose)
  - a handful of synthetic sequences trained on for many steps with held-out sequences
    evaluated along the way: the model memorizes, train loss falls, held-out loss rises
    (eval_rising)
  - sweeps/quickstart.yaml: no flag
  - a run whose rank shares its core with a busy loop: marked as measured on shared cores
    (not a flag)

Usage: test_health_flags.py [BIN_DIR] [unittest options]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import yaml

import cli_util
from cli_util import show, sweep

TINY = {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16}

# One sweep, one point per misbehaviour (a base plus include entries): each differs from
# the base in what makes it misbehave, and in the model, so no two runs do the same work
# per step and the sweep-level throughput comparison stays out of these checks.
PROBLEMS = {
    "name": "health",
    "base": {"model": TINY, "data": {"kind": "synthetic"},
             "train": {"steps": 60, "micro_batch": 4, "lr": 1.0e-3, "log_every": 20}},
    "include": [
        # Every step overflows: 1e30 backed off by 0.99 a step stays far above fp16's range.
        {"train.precision": "fp16", "train.loss_scale_init": 1.0e30, "train.loss_scale_backoff": 0.99,
         "model.d_model": 48},
        {"train.lr": 10, "train.on_nan": "skip_step", "model.d_model": 40},
        # One update with a learning rate of 1 at step 40 (test-only fault): the loss spikes.
        {"fault.spike_step": 40, "model.d_model": 56},
        # Eight sequences to learn by heart; four held-out ones from the same chain.
        {"data.samples": 8, "data.eval_fraction": 0.5, "train.steps": 200, "train.lr": 1.0e-2,
         "train.eval_every": 20, "train.eval_batches": 1, "model.d_model": 64},
    ],
}


def summary_attrs(record):
    with h5py.File(record, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["summary"].attrs.items()}


def run_configs(out):
    """run id -> {dotted key: canonical text} of every run directory of a sweep (the
    sections' own keys; nested maps such as model.moe are left out)."""
    runs = {}
    for rid in os.listdir(os.path.join(out, "runs")):
        with open(os.path.join(out, "runs", rid, "config.yaml"), encoding="utf-8") as f:
            doc = yaml.load(f, Loader=yaml.BaseLoader)  # every scalar as the text sweep wrote
        runs[rid] = {s + "." + k: v for s, keys in doc.items() for k, v in keys.items() if isinstance(v, str)}
    return runs


def status_lines(out):
    p = sweep("status", out)
    assert p.returncode == 0, show(p)
    return p.stdout, {m.group(1): m.group(0) for m in re.finditer(r"(?m)^  ([0-9a-f]{16})  .*$", p.stdout)}


class HealthFlags(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="health_flags_test.")
        grid = os.path.join(cls.tmp, "health.yaml")
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(PROBLEMS, f, sort_keys=False)
        cls.out = os.path.join(cls.tmp, "out")
        cls.run_p = sweep("run", grid, "--out", cls.out, "--parallel", "2")
        cls.configs = run_configs(cls.out)
        cls.status, cls.lines = status_lines(cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_id(self, **match):
        ids = [rid for rid, c in self.configs.items() if all(c.get(k) == v for k, v in match.items())]
        self.assertEqual(len(ids), 1, "%s among %s" % (match, self.configs))
        return ids[0]

    def flags_of(self, rid):
        """The stored flags (h5py), after checking the run completed and every reader agrees."""
        run_dir = os.path.join(self.out, "runs", rid)
        self.assertTrue(os.path.exists(os.path.join(run_dir, "record.h5")), show(self.run_p))
        attrs = summary_attrs(os.path.join(run_dir, "record.h5"))
        self.assertIn("health", attrs)
        flags = attrs["health"].split()
        for flag in flags:
            self.assertTrue(attrs.get("health." + flag), "health.%s holds its sentence" % flag)
        # `sweep status`: the run is completed and its state line names the flags.
        line = self.lines.get(rid, "")
        self.assertIn(" completed ", line, self.status)
        self.assertIn("health: " + (" ".join(flags) if flags else "ok"), line, self.status)
        # The trainer's end-of-run lines and the driver's line when the run finished.
        with open(os.path.join(run_dir, "logs", "rank0.log"), encoding="utf-8", errors="replace") as f:
            log = f.read()
        self.assertIn("health: " + (" ".join(flags) if flags else "ok"), log)
        self.assertRegex(self.run_p.stdout, r"completed +%s .*health: %s" % (rid, re.escape(" ".join(flags) or "ok")))
        return flags, attrs

    def test_the_all_skipped_fp16_run_is_flagged(self):
        flags, attrs = self.flags_of(self.run_id(**{"train.precision": "fp16"}))
        self.assertIn("skipped_steps", flags)
        self.assertIn("60 of 60 steps (100%)", attrs["health.skipped_steps"])
        self.assertIn("5 completed (4 with health flags)", self.status)

    def test_the_lr_10_run_is_flagged(self):
        flags, attrs = self.flags_of(self.run_id(**{"train.lr": "10"}))
        self.assertIn("loss_rose", flags)

    def test_a_planted_loss_spike_is_flagged_at_its_step(self):
        flags, attrs = self.flags_of(self.run_id(**{"fault.spike_step": "40"}))
        self.assertIn("loss_spike", flags)
        # The bad update is step 40's: the loss it gives is step 41's.
        self.assertTrue(attrs["health.loss_spike"].startswith("the loss spiked at step 41: "),
                        attrs["health.loss_spike"])

    def test_held_out_loss_rising_while_train_loss_falls_is_flagged(self):
        flags, attrs = self.flags_of(self.run_id(**{"data.samples": "8"}))
        self.assertIn("eval_rising", flags)
        self.assertNotIn("loss_rose", flags)

    def test_the_base_point_is_healthy(self):
        flags, _ = self.flags_of(self.run_id(**{"train.lr": "0.001", "train.precision": "fp32", "model.d_model": "32"}))
        self.assertEqual(flags, [])

    def test_the_report_counts_flagged_runs_as_problems(self):
        p = sweep("report", self.out, "--format", "json", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        rep = json.loads(p.stdout)
        by_id = {r["run_id"]: r for r in rep["runs"]}
        self.assertIn("skipped_steps", [h["flag"] for h in by_id[self.run_id(**{"train.precision": "fp16"})]["health"]])
        self.assertGreaterEqual(rep["summary"]["health_flagged"], 4)
        self.assertGreaterEqual(rep["summary"]["problems"], 4)
        self.assertEqual(rep["summary"]["completed"], 5)
        # The held-out run's objective is its final eval loss.
        ev = by_id[self.run_id(**{"data.samples": "8"})]
        self.assertEqual(ev["objective_name"], "final eval loss")
        self.assertEqual(ev["objective"], ev["final_eval_loss"])
        p = sweep("report", self.out, "--format", "md", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("## Health", p.stdout)
        self.assertIn("eval\\_rising", p.stdout)


#: Flags that depend on the machine's load while the runs ran, not on the runs.
LOAD_FLAGS = {"throughput_outlier"}


class HealthyQuickstart(unittest.TestCase):
    def test_the_quickstart_grid_raises_no_flag(self):
        tmp = tempfile.mkdtemp(prefix="health_quickstart_test.")
        try:
            out = os.path.join(tmp, "out")
            p = sweep("run", os.path.join(cli_util.ROOT, "sweeps", "quickstart.yaml"), "--out", out)
            self.assertEqual(p.returncode, 0, show(p))
            status, lines = status_lines(out)
            self.assertEqual(len(lines), 4, status)
            # throughput_outlier compares the runs' speed with each other: it depends on
            # the machine's load while they ran (ctest runs other tests beside this one),
            # not on the runs, so it is the one flag allowed here. Every flag judged from a
            # run's own numbers must stay down.
            for rid, line in lines.items():
                m = re.search(r"health: ([a-z_ ]+)\]", line)
                self.assertTrue(m, line)
                self.assertLessEqual(set(m.group(1).split()) - {"ok"}, LOAD_FLAGS, status)
                attrs = summary_attrs(os.path.join(out, "runs", rid, "record.h5"))
                self.assertEqual(attrs.get("health"), "", attrs)
            p = sweep("report", out, "--format", "json", "-o", "-")
            rep = json.loads(p.stdout)
            flagged = 0
            for run in rep["runs"]:
                self.assertLessEqual({h["flag"] for h in run["health"]}, LOAD_FLAGS, run)
                flagged += 1 if run["health"] else 0
            # A run with a load flag counts as a problem (it is a health flag); nothing else may.
            self.assertEqual(rep["summary"]["health_flagged"], flagged, rep["summary"])
            self.assertEqual(rep["summary"]["problems"], flagged, rep["summary"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class SharedCores(unittest.TestCase):
    """A run whose one rank shares its core with a busy loop (both pinned to core 0): the
    trainer's run-queue wait says so (summary rank_runqueue_share), and the report marks
    its tokens/s; it is not a health flag."""

    def test_a_rank_sharing_its_core_is_marked_shared_not_flagged(self):
        if not os.path.exists("/proc/thread-self/schedstat"):
            self.skipTest("this kernel keeps no schedstat")
        tmp = tempfile.mkdtemp(prefix="health_shared_test.")
        self.addCleanup(shutil.rmtree, tmp, True)
        grid = os.path.join(tmp, "shared.yaml")
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump({"name": "shared", "base": {"model": TINY, "data": {"kind": "synthetic"},
                                                       "train": {"steps": 40, "micro_batch": 4, "threads": 1}},
                            "grid": {"train.seed": [1]}}, f, sort_keys=False)
        out = os.path.join(tmp, "out")
        busy = subprocess.Popen(["taskset", "-c", "0", "/bin/sh", "-c", "while :; do :; done"])
        try:
            p = cli_util.run(["taskset", "-c", "0", os.path.join(cli_util.BIN_DIR, "sweep"), "run", grid, "--out", out])
        finally:
            busy.kill()
            busy.wait()
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        attrs = summary_attrs(os.path.join(out, "runs", rid, "record.h5"))
        # Two runnable threads on one core: the rank waited for it about half its time.
        self.assertGreaterEqual(float(attrs["rank_runqueue_share"]), 0.1, attrs)
        self.assertEqual(attrs.get("health"), "", attrs)
        rep = json.loads(sweep("report", out, "--format", "json", "-o", "-").stdout)
        (run,) = rep["runs"]
        self.assertTrue(run["shared_cores"], run)
        self.assertGreaterEqual(run["runqueue_share"], 0.1, run)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
