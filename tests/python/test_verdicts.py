#!/usr/bin/python3
"""Every reader says the same word for each run (docs/design.md, "Every verdict, and
who says it").

One sweep directory holds one run of each kind: completed, diverged, failed, interrupted
(Ctrl-C while it ran), pending (never started), damaged (a completed record edited
afterwards) and unverified (a record relabelled schema version 1 in a directory whose
driver noted no digest for it). The test walks it through plan, status, report (md,
csv, json, html), compare of the sweep with itself and of single records, export,
reproduce and show, and asserts each reader's word for each run against one table.

Usage: test_verdicts.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import csv
import html as html_module
import io
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
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
from programs_util import program_grid, runs_by_mode, write_program  # noqa: E402

PROGRAM = r'''
import time
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
mode = dict(pairs)["model.mode"]
r = TinyRecord(out, text, pairs)
for s in (1, 2):
    r.step(s, loss=float("nan") if mode == "diverged" and s == 2 else 1.0 / s, lr=0.001)
r.checksum(2)
if mode == "failed":
    r.abandon("the program gave up at step 2")
    sys.exit(1)
if mode == "interrupted":  # holds still until the driver stops it
    r.flush()
    open(os.path.join(out, "waiting"), "w").close()
    time.sleep(600)
r.finish("diverged" if mode == "diverged" else "completed", "non-finite loss at step 2" if mode == "diverged" else "")
'''

KINDS = ["ok", "diverged", "failed", "damaged", "unverified", "interrupted", "pending"]

# Each kind's word, reader by reader. None: the reader does not list the run (it counts it).
WORDS = {
    #             plan           status         report (runs table or failed-runs heading)  csv status + verified
    "ok":          ("done",        "completed",   "completed",              ("completed", "yes")),
    "diverged":    ("diverged",    "diverged",    "diverged",               ("diverged", "yes")),
    "failed":      ("failed",      "failed",      "failed",                 ("failed", "")),
    "damaged":     ("damaged",     "damaged",     "damaged",                ("damaged", "")),
    "unverified":  ("done",        "completed",   "completed (unverified)", ("completed", "no")),
    "interrupted": ("interrupted", "interrupted", "interrupted",            ("interrupted", "")),
    "pending":     ("pending",     "pending",     None,                     None),
}
SUMMARY = "2 completed, 1 failed, 1 interrupted, 1 diverged, 1 damaged, 1 pending"


class Verdicts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="verdicts_test.")
        script = write_program(os.path.join(cls.tmp, "prog.py"), PROGRAM)
        cls.grid = program_grid(os.path.join(cls.tmp, "kinds.yaml"), "kinds", script, "kinds",
                                {"train": {"steps": 2, "threads": 1, "lr": 0.001}}, grid={"model.mode": KINDS},
                                modes=KINDS)
        cls.out = os.path.join(cls.tmp, "out")
        # One run at a time, in grid order: Ctrl-C while `interrupted` holds still leaves
        # `pending` never started.
        driver = subprocess.Popen([os.path.join(cli_util.BIN_DIR, "sweep"), "run", cls.grid, "--out", cls.out,
                                   "--parallel", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=cli_util.program_env())
        try:
            deadline = time.monotonic() + 240
            while not cls.waiting() and time.monotonic() < deadline and driver.poll() is None:
                time.sleep(0.1)
            if not cls.waiting():
                raise AssertionError("the interrupted run never started:\n" + driver.communicate(timeout=60)[0])
            driver.send_signal(signal.SIGINT)
            said, _ = driver.communicate(timeout=120)
        finally:
            if driver.poll() is None:
                driver.kill()
        assert driver.returncode == 130, said
        cls.ids = runs_by_mode(cls.out)
        with open(os.path.join(cls.out, "points.tsv"), encoding="utf-8") as f:
            for line in f.read().splitlines()[1:]:
                rid, values = line.split("\t")
                cls.ids.setdefault(values.split("=")[1], rid)
        assert set(cls.ids) == set(KINDS), cls.ids
        # Damaged: one loss edited after completion (the digest no longer matches).
        with h5py.File(cls.record("damaged"), "r+") as f:
            f["metrics"]["loss"][0] = 0.5
        # Unverified: relabelled version 1, no digest, in a directory whose driver noted none.
        state = os.path.join(cls.run_dir("unverified"), "state")
        with open(state, encoding="utf-8") as f:
            lines = [ln for ln in f if not ln.startswith("digest: ")]
        with open(state, "w", encoding="utf-8") as f:
            f.writelines(lines)
        accepted = os.path.join(cls.out, "accepted", os.path.basename(cls.run_dir("unverified")))
        os.remove(accepted)  # a version before accepted/ noted none there either
        with h5py.File(cls.record("unverified"), "r+") as f:
            f.attrs["schema_version"] = np.int64(1)
            del f.attrs["digest"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    @classmethod
    def waiting(cls):
        runs = os.path.join(cls.out, "runs")
        return os.path.isdir(runs) and any(os.path.exists(os.path.join(runs, r, "waiting")) for r in os.listdir(runs))

    @classmethod
    def run_dir(cls, kind):
        return os.path.join(cls.out, "runs", cls.ids[kind])

    @classmethod
    def record(cls, kind):
        return os.path.join(cls.run_dir(kind), "record.h5")

    def report(self, fmt):
        path = os.path.join(self.tmp, "r." + fmt)
        p = sweep("report", self.out, "--format", fmt, "-o", path)
        self.assertEqual(p.returncode, 0, show(p))
        with open(path, encoding="utf-8") as f:
            return f.read()

    def test_plan(self):
        p = sweep("plan", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("7 runs in %s (2 done, 4 to run, 1 recorded as diverged)" % self.out, p.stdout, show(p))
        for kind, words in WORDS.items():
            self.assertRegex(p.stdout, r"\n%s  %s\s" % (self.ids[kind], words[0]), kind)

    def test_status(self):
        p = sweep("status", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("7 runs: " + SUMMARY + "\n", p.stdout, show(p))
        for kind, words in WORDS.items():
            self.assertRegex(p.stdout, r"\n  %s  %s\s" % (self.ids[kind], words[1]), kind)
        self.assertRegex(p.stdout, r"%s .*unverified \(schema version 1" % self.ids["unverified"])

    def test_report_markdown_and_html(self):
        md = self.report("md")
        html = html_module.unescape(self.report("html"))
        # Problems: the three runs without a record, and the diverged run's health flag.
        self.assertIn("7 runs, 4 problems: " + SUMMARY + ";", md)
        self.assertIn("<tr><th>runs</th><td>" + SUMMARY + ";", html)
        for kind, words in WORDS.items():
            rid, word = self.ids[kind], words[2]
            if word is None:
                self.assertNotIn(rid, md, kind)
            elif kind in ("ok", "diverged", "unverified"):  # a readable record: the runs table
                self.assertRegex(md, r"\n\| %s \| %s \|" % (rid, re.escape(word)), kind)
                self.assertRegex(html, r"<td class=\"id\">%s</td><td>%s[<]" % (rid, re.escape(word)), kind)
            else:  # no readable record: the failed runs
                self.assertIn("\n### %s: %s\n" % (rid, word), md, kind)
                self.assertRegex(html, r"<td class=\"id\">%s</td><td>%s</td>" % (rid, word), kind)

    def test_report_csv_and_json(self):
        rows = list(csv.reader(io.StringIO(self.report("csv"), newline="")))
        head = rows[0]
        self.assertEqual(head[:3], ["run_id", "status", "verified"])
        by_id = {r[0]: r for r in rows[1:]}
        rep = json.loads(self.report("json"))
        self.assertEqual(rep["summary"]["runs"], 7)
        for key, n in (("completed", 2), ("failed", 1), ("interrupted", 1), ("diverged", 1), ("damaged", 1),
                       ("pending", 1), ("unverified", 1)):
            self.assertEqual(rep["summary"][key], n, key)
        in_json = {r["run_id"]: (r["status"], "yes" if r["verified"] else "no") for r in rep["runs"]}
        in_json.update({r["run_id"]: (r["status"], "") for r in rep["failed"] if r["run_id"] not in in_json})
        for kind, words in WORDS.items():
            rid = self.ids[kind]
            if words[3] is None:
                self.assertNotIn(rid, by_id, kind)
                self.assertNotIn(rid, in_json, kind)
                continue
            self.assertEqual(tuple(by_id[rid][1:3]), words[3], kind)
            self.assertEqual(in_json[rid], words[3], kind)

    def test_compare(self):
        p = sweep("compare", self.out, self.out)
        self.assertEqual(p.returncode, 1, show(p))  # runs it could not compare: not a match
        out = p.stdout
        self.assertIn("%s  identical bit-for-bit: 2 steps, 2 checksums\n" % self.ids["ok"], out, show(p))
        self.assertIn("%s  identical bit-for-bit: 2 steps, 2 checksums\n" % self.ids["diverged"], out, show(p))
        self.assertIn("%s  identical bit-for-bit: 2 steps, 2 checksums; unverified in A and B (schema version 1: "
                      "no digest)\n" % self.ids["unverified"], out, show(p))
        for kind in ("failed", "damaged", "interrupted"):
            self.assertIn("%s  not compared: %s in A, %s in B: " % (self.ids[kind], kind, kind), out, show(p))
        self.assertNotIn(self.ids["pending"], out)
        self.assertIn("3 pairs: 3 identical, 0 within tolerance, 0 differ; 3 not compared; 0 only in A, 0 only in B",
                      out, show(p))
        # Record against record: the same words.
        p = sweep("compare", self.record("unverified"), self.record("ok"))
        self.assertIn("unverified: a record of schema version 1 has no digest", p.stdout, show(p))
        p = sweep("compare", self.record("damaged"), self.record("ok"))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("integrity check failed", p.stderr, show(p))
        # A failed or stopped run's partial record is evidence: compared as it stands, in the
        # run's word, never called verified, and never equal to a completed run.
        for kind in ("failed", "interrupted"):
            p = sweep("compare", self.run_dir(kind), self.record("ok"))
            self.assertEqual(p.returncode, 1, show(p))
            self.assertIn("   partial: no completed record: the run is %s (" % kind, p.stdout, show(p))
            self.assertIn("its rows as of the last flush, not verified", p.stdout, show(p))
            self.assertIn("\nover the rows the partial records hold: ", p.stdout, show(p))
            self.assertIn(", but the status differs: ", p.stdout, show(p))

    def test_export(self):
        path = os.path.join(self.tmp, "export.csv")
        p = sweep("export", self.out, "-o", path)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("export: 3 runs exported; left out, without a readable record: 1 damaged, 1 failed, "
                      "1 interrupted (sweep status lists them)", p.stderr, show(p))
        self.assertIn("export: 1 exported runs are unverified", p.stderr, show(p))
        with open(path, encoding="utf-8") as f:
            exported = {ln.split(",")[0] for ln in f.read().splitlines()[1:]}
        self.assertEqual(exported, {self.ids[k] for k in ("ok", "diverged", "unverified")})

    def test_show(self):
        said = {"ok": ("verdict:     verified by its digest", "status:      completed"),
                "diverged": ("verdict:     verified by its digest", "status:      diverged: non-finite loss at step 2"),
                "unverified": ("verdict:     unverified (schema version 1: no digest to check it by)",
                               "status:      completed"),
                "damaged": ("verdict:     DAMAGED: ", "integrity check failed"),
                "failed": ("verdict:     a partial record (the run has not completed; not verified)",
                           "driver:      failed: "),
                "interrupted": ("verdict:     a partial record (the run has not completed; not verified)",
                                "driver:      interrupted: ")}
        for kind, words in said.items():
            p = sweep("show", self.run_dir(kind))
            self.assertEqual(p.returncode, 0, show(p))
            for w in words:
                self.assertIn(w, p.stdout, kind + "\n" + show(p))
        p = sweep("show", self.run_dir("pending"))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("no record.h5 (or partial record) there", p.stderr, show(p))

    def test_reproduce(self):
        p = sweep("reproduce", self.run_dir("ok"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 2 steps, 2 checksums", p.stdout, show(p))
        p = sweep("reproduce", self.run_dir("diverged"))
        self.assertIn("reproduced bit-for-bit: 2 steps, 2 checksums", p.stdout, show(p))
        self.assertIn("re-run status: diverged (non-finite loss at step 2)", p.stdout, show(p))
        p = sweep("reproduce", self.run_dir("unverified"))
        self.assertIn("reproduced bit-for-bit", p.stdout, show(p))
        self.assertIn("the original is unverified (schema version 1: no digest)", p.stdout, show(p))
        p = sweep("reproduce", self.run_dir("damaged"))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("integrity check failed", p.stderr, show(p))
        for kind in ("failed", "interrupted"):
            p = sweep("reproduce", self.run_dir(kind))
            self.assertEqual(p.returncode, 2, show(p))
            self.assertIn("no completed record: the run is %s (" % kind, p.stderr, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
