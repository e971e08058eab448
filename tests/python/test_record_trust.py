#!/usr/bin/python3
"""One rule for whether a record is its run's (record_problem in
results/analysis/sweep_records.h), held by the driver and every reader:

a. a program that records the run's id with another run's config (lr 0.5 in the record of
   a run trained with 0.001): the run fails with one line, the record is moved aside at
   once, and no reader shows 0.5 as a completed run;
b. a program whose config pairs disagree with its config text: the same;
c. a record of the wrong run id: the driver's report and status count it failed, never
   completed (they agreed with the driver only after the next `sweep run`);
d. a completed record edited with h5py, relabelled schema version 1 and its digest
   deleted (so nothing verifies it): `sweep run`, `status`, `report` and `compare` call it
   damaged, `sweep run` moves it aside and trains the point again;
e. a genuine version-1 record in a directory whose driver noted no digest: read, and
   marked unverified by status, report and compare;
f. a record whose dataset declares 10^12 rows (a 100 KB file): damaged, and status, the
   report and the next `sweep run` go on.

Usage: test_record_trust.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import html as html_module
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
from programs_util import program_grid, runs_by_mode, write_program  # noqa: E402

PROGRAM = r'''
import sweep_record as sr
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
mode = dict(pairs)["model.mode"]
run_id = sr.run_id_of(text)
if mode == "foreign_config":  # the text of another run (lr 0.5), under this run's id
    text = text.replace("\n  lr: 0.001\n", "\n  lr: 0.5\n")
    pairs = [(k, "0.5" if k == "train.lr" else v) for k, v in pairs]
if mode == "foreign_pairs":  # the right text, but the pairs readers show say lr 0.5
    pairs = [(k, "0.5" if k == "train.lr" else v) for k, v in pairs]
if mode == "wrong_id":
    run_id = "0123456789abcdef"
with TinyRecord(out, text, pairs, run_id=run_id) as r:
    r.step(1, loss=1.0, lr=0.001)
    r.checksum(1)
    r.finish()
'''


class Trust(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="record_trust_test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.script = write_program(os.path.join(self.tmp, "prog.py"), PROGRAM)

    def grid(self, modes, name="trust"):
        return program_grid(os.path.join(self.tmp, name + ".yaml"), name, self.script, "trust",
                            {"train": {"steps": 1, "threads": 1, "lr": 0.001}}, grid={"model.mode": modes},
                            modes=["ok", "foreign_config", "foreign_pairs", "wrong_id"])

    def run_of(self, out, mode):
        rid = runs_by_mode(out)[mode]
        return rid, os.path.join(out, "runs", rid)

    def report_json(self, out):
        p = sweep("report", out, "--format", "json", "-o", os.path.join(self.tmp, "r.json"))
        self.assertEqual(p.returncode, 0, show(p))
        with open(os.path.join(self.tmp, "r.json"), encoding="utf-8") as f:
            return json.load(f)

    def refused(self, mode, needle):
        out = os.path.join(self.tmp, "out-" + mode)
        p = sweep("run", self.grid(["ok", mode]), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("1 completed, 0 already done, 1 failed", p.stdout, show(p))
        self.assertIn(needle, p.stdout, show(p))
        rid, d = self.run_of(out, mode)
        # Moved aside at once (kept, never deleted): no reader can count it.
        self.assertFalse(os.path.exists(os.path.join(d, "record.h5")), show(p))
        aside = [n for n in os.listdir(d) if n.startswith("record.h5.damaged-")]
        self.assertEqual(len(aside), 1, os.listdir(d))
        # The driver's own report agrees with it.
        with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
            html = f.read()
        runs_row = re.search(r"<tr><th>runs</th><td>([^<]*)</td>", html)
        self.assertIsNotNone(runs_row)
        self.assertEqual(runs_row.group(1), "1 completed, 1 failed", runs_row.group(1))
        self.assertTrue(needle in html_module.unescape(html), "the driver's reason is not in the failed runs' table")
        q = sweep("status", out)
        self.assertIn("1 completed", q.stdout, show(q))
        self.assertIn("1 failed", q.stdout, show(q))
        return out, rid

    def test_a_another_runs_config_under_this_runs_id(self):
        self.refused("foreign_config", "record.h5's config does not hash to its run id")

    def test_b_config_pairs_that_disagree_with_the_config_text(self):
        self.refused("foreign_pairs", "record.h5 shows train.lr = 0.5, but the config its run id names says 0.001")

    def test_c_another_run_id(self):
        self.refused("wrong_id", "record.h5 names run '0123456789abcdef'")

    def test_d_a_record_relabelled_as_an_unverified_version_is_damaged(self):
        out = os.path.join(self.tmp, "out")
        p = sweep("run", self.grid(["ok"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        rid, d = self.run_of(out, "ok")
        record = os.path.join(d, "record.h5")
        good = os.path.join(self.tmp, "good.h5")
        shutil.copyfile(record, good)
        with h5py.File(record, "r+") as f:
            f["metrics"]["loss"][...] = np.full(f["metrics"]["loss"].shape, 0.25)
            f.attrs["schema_version"] = np.int64(1)
            del f.attrs["digest"]
        q = sweep("status", out)
        self.assertIn("damaged", q.stdout, show(q))
        self.assertIn("its bytes are not those the driver accepted", q.stdout, show(q))  # accepted/<id>
        # Without the note of its bytes (a sweep of an earlier version), the state's digest
        # line still catches it once it is parsed.
        os.remove(os.path.join(out, "accepted", rid))
        q = sweep("status", out)
        self.assertIn("damaged", q.stdout, show(q))
        self.assertIn("is not the record this run completed with: its digest is missing", q.stdout, show(q))
        r = sweep("report", out, "--format", "md", "-o", os.path.join(self.tmp, "r.md"))
        self.assertEqual(r.returncode, 0, show(r))
        with open(os.path.join(self.tmp, "r.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("is not the record this run completed with", md)
        self.assertNotRegex(md, r"\|\s*completed\s*\|", "the damaged run is listed as completed")
        c = sweep("compare", record, good)
        self.assertNotEqual(c.returncode, 0, show(c))
        self.assertIn("is not the record this run completed with", c.stdout + c.stderr, show(c))
        p = sweep("run", self.grid(["ok"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("1 completed, 0 already done", p.stdout, show(p))
        self.assertTrue(any(n.startswith("record.h5.damaged-") for n in os.listdir(d)), os.listdir(d))

    def test_e_a_genuine_old_record_is_read_but_marked_unverified_everywhere(self):
        # A sweep directory of a version that noted no digest, with a version-1 record:
        # still read (older sweeps stay readable), never presented as verified.
        out = os.path.join(self.tmp, "old")
        p = sweep("run", self.grid(["ok"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        rid, d = self.run_of(out, "ok")
        state = os.path.join(d, "state")
        with open(state, encoding="utf-8") as f:
            lines = [ln for ln in f if not ln.startswith("digest: ")]
        with open(state, "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.remove(os.path.join(out, "accepted", rid))  # a version before accepted/ noted none there either
        record = os.path.join(d, "record.h5")
        with h5py.File(record, "r+") as f:
            f.attrs["schema_version"] = np.int64(1)
            del f.attrs["digest"]
        q = sweep("status", out)
        self.assertIn("1 completed", q.stdout, show(q))
        self.assertIn("unverified (schema version 1: no digest to check it by)", q.stdout, show(q))
        r = sweep("report", out, "--format", "md", "-o", os.path.join(self.tmp, "old.md"))
        self.assertEqual(r.returncode, 0, show(r))
        with open(os.path.join(self.tmp, "old.md"), encoding="utf-8") as f:
            self.assertIn("1 unverified (records of schema version 1 have no digest", f.read())
        c = sweep("compare", record, record)
        self.assertIn("unverified: a record of schema version 1 has no digest", c.stdout, show(c))
        p = sweep("run", self.grid(["ok"]), "--out", out)  # an old record is not re-run
        self.assertIn("0 completed, 1 already done", p.stdout, show(p))

    def test_f_a_record_that_declares_a_trillion_rows_is_damaged_and_wedges_nothing(self):
        out = os.path.join(self.tmp, "huge")
        p = sweep("run", self.grid(["ok", "foreign_pairs"]), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        rid, d = self.run_of(out, "ok")
        with h5py.File(os.path.join(d, "record.h5"), "r+") as f:
            del f["metrics"]["loss"]
            f["metrics"].create_dataset("loss", shape=(10 ** 12,), dtype="f8", chunks=(1024,), compression="gzip")
        os.remove(os.path.join(out, "accepted", rid))  # parsed, as in a sweep of an earlier version
        self.assertLess(os.path.getsize(os.path.join(d, "record.h5")), 1 << 20)
        for args in (["status", out], ["report", out, "-o", os.path.join(self.tmp, "huge.md"), "--format", "md"]):
            q = sweep(*args)
            self.assertEqual(q.returncode, 0, show(q))
        q = sweep("status", out)
        self.assertIn("damaged", q.stdout, show(q))
        self.assertIn("dataset 'loss' declares 1000000000000 elements but stores", q.stdout, show(q))
        p = sweep("run", self.grid(["ok"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("1 completed, 0 already done", p.stdout, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
