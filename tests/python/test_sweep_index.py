#!/usr/bin/python3
"""The sweep's index (records.index, harness/driver/sweep_index.h), through the `sweep` CLI:
a cache of what reading each record found, keyed by the record file's identity, never the
source of truth.

a. warm: `sweep status` twice prints the same as the first full read; the rerun's skip
   check and `sweep verify` agree;
b. a record edited with h5py and its modification time put back (`touch -d`): caught by
   `status`, moved aside and re-run by `sweep run`;
c. a hand-edited index that claims a damaged record is fine: rebuilt with one line, the
   damage shown;
d. an index forged with its checksum recomputed: `sweep verify` (which reads every record
   whatever the index says) names the damage and exits 1, `report` never trusted it, and
   after verify `status` shows it too;
e. a truncated, foreign-version, directory or FIFO index: one line, the right states, no
   hang.

The record cache (<dir>/record-cache, results/record/record_cache.h), what `report`,
`compare` and `export` read instead of every HDF5 record:
f. warm, every report format and compare say, byte for byte, what they say with the cache
   off (a key file that is not the user's own);
g. a record damaged and its cache entry forged to the file's new identity, the entry's
   XXH3-128 recomputed (what anyone without the user's key can do): one line says the
   entry was refused, and report, compare and export count the record damaged.

Usage: test_sweep_index.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import os
import re
import shutil
import stat
import struct
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np
import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
from programs_util import program_grid, write_program  # noqa: E402

PROGRAM = r'''
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
lr = float(dict(pairs)["train.lr"])
with TinyRecord(out, text, pairs) as r:
    for step in range(1, 4):
        r.step(step, loss=3.0 - lr * step, lr=lr)
    r.checksum(3)
    r.finish()
'''

INDEX = "records.index"
REBUILT = "rebuilt from the records"
REFUSED = "damaged, edited or made under another key"
MAGIC = b"sweep-record-cache 1\n"


class Index(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sweep_index_test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        script = write_program(os.path.join(self.tmp, "prog.py"), PROGRAM)
        self.grid = program_grid(os.path.join(self.tmp, "index.yaml"), "index", script, "index",
                                 {"train": {"steps": 3, "threads": 1}}, grid={"train.lr": [0.1, 0.2, 0.3, 0.4]})
        self.out = os.path.join(self.tmp, "out")
        self.index = os.path.join(self.out, INDEX)
        # The user's key for the record cache's tags lives here, not in the real home.
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")
        self.addCleanup(lambda: os.environ.pop("XDG_STATE_HOME") if old is None
                        else os.environ.__setitem__("XDG_STATE_HOME", old))

    def run_sweep(self, expect="4 completed, 0 already done"):
        p = sweep("run", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn(expect, p.stdout, show(p))
        return p

    def records(self):
        runs = os.path.join(self.out, "runs")
        return sorted(os.path.join(runs, r, "record.h5") for r in os.listdir(runs))

    def settle(self):
        """Waits until every record last changed over 2 s ago: only then does the index
        vouch for it (a change within one timestamp tick would keep its identity)."""
        newest = max(max(os.stat(r).st_ctime, os.stat(r).st_mtime) for r in self.records())
        time.sleep(max(0.0, newest + 2.2 - time.time()))

    def status(self, *needles):
        p = sweep("status", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        for n in needles:
            self.assertIn(n, p.stdout + p.stderr, show(p))
        return p

    def built_index(self):
        self.run_sweep()
        self.settle()
        first = self.status("4 completed")
        with open(self.index, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.startswith("sweep-index 3\n"), text[:100])
        self.assertRegex(text, r"\nend 4 [0-9a-f]{16}\n$")
        return first

    def damage(self, record):
        """Another loss in the record, its modification time put back as `touch -d` would."""
        before = os.stat(record)
        with h5py.File(record, "r+") as f:
            f["metrics"]["loss"][...] = np.full(f["metrics"]["loss"].shape, 0.25)
        os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(record)
        self.assertEqual(after.st_mtime_ns, before.st_mtime_ns)
        self.assertEqual(after.st_ino, before.st_ino)
        return after

    def forge(self, record, after, recompute):
        """Rewrites the index entry of `record`'s run to the file's new identity, as if the
        damaged file had been read and found good; with `recompute`, the checksum too."""
        rid = os.path.basename(os.path.dirname(record))
        with open(self.index, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            fields = line.split("\t")
            if len(fields) > 6 and fields[1] == rid:
                fields[2:7] = [str(after.st_dev), str(after.st_ino), str(after.st_size),
                               str(after.st_mtime_ns), str(after.st_ctime_ns)]
                lines[i] = "\t".join(fields)
        body = "\n".join(lines[:-2]) + "\n"
        end = lines[-2]
        if recompute:
            sys.path.insert(0, os.path.join(cli_util.ROOT, "python"))
            import sweep_record as sr
            end = "end 4 " + sr.run_id_of(body)
        with open(self.index, "w", encoding="utf-8") as f:
            f.write(body + end + "\n")
        return rid

    def test_a_a_warm_status_and_rerun_say_what_a_full_read_says(self):
        first = self.built_index()
        mtime = os.stat(self.index).st_mtime_ns
        again = self.status()
        self.assertEqual(again.stdout, first.stdout)
        self.assertNotIn(REBUILT, again.stderr, show(again))
        self.assertEqual(os.stat(self.index).st_mtime_ns, mtime, "an index that did not change is not rewritten")
        self.run_sweep("0 completed, 4 already done")
        v = sweep("verify", self.out)
        self.assertEqual(v.returncode, 0, show(v))
        self.assertIn("4 records read and verified, 0 damaged or stale", v.stdout, show(v))

    def test_b_a_record_edited_with_its_time_put_back_is_caught(self):
        self.built_index()
        record = self.records()[1]
        self.damage(record)
        self.status("1 damaged", "digest")
        self.run_sweep("1 completed, 3 already done")
        aside = [n for n in os.listdir(os.path.dirname(record)) if n.startswith("record.h5.damaged-")]
        self.assertEqual(len(aside), 1, os.listdir(os.path.dirname(record)))

    def test_c_a_hand_edited_index_is_rebuilt_and_hides_nothing(self):
        self.built_index()
        record = self.records()[2]
        rid = self.forge(record, self.damage(record), recompute=False)
        p = self.status("1 damaged")
        lines = [ln for ln in p.stderr.splitlines() if REBUILT in ln]
        self.assertEqual(len(lines), 1, show(p))
        self.assertIn("damaged or edited (its checksum does not match its contents)", lines[0])
        self.assertRegex(p.stdout, rid + r"\s+damaged", show(p))
        self.assertNotIn(REBUILT, self.status().stderr, "rebuilt once, then trusted again")

    def test_d_a_forged_index_is_caught_by_verify_and_never_trusted_by_report_or_compare(self):
        self.built_index()
        record = self.records()[3]
        rid = self.forge(record, self.damage(record), recompute=True)
        v = sweep("verify", self.out)
        self.assertEqual(v.returncode, 1, show(v))
        self.assertRegex(v.stdout, rid + r"  damaged: .*digest", show(v))
        self.assertIn("3 records read and verified, 1 damaged or stale", v.stdout, show(v))
        md = os.path.join(self.tmp, "r.md")
        r = sweep("report", self.out, "--format", "md", "-o", md)
        self.assertEqual(r.returncode, 0, show(r))
        with open(md, encoding="utf-8") as f:
            self.assertIn("3 completed", f.read())
        self.assertRegex(self.status("1 damaged").stdout, rid + r"\s+damaged")
        # Nor by compare: the forged run is not compared, and the comparison does not pass.
        c = sweep("compare", self.out, self.out)
        self.assertEqual(c.returncode, 1, show(c))
        self.assertRegex(c.stdout, rid + r"  not compared: damaged in A, damaged in B", show(c))
        self.assertIn("3 pairs: 3 identical", c.stdout, show(c))

    def outputs(self):
        """Every report format, compare of the sweep with itself and the export, as text."""
        out = {}
        for fmt in ("html", "md", "csv", "json"):
            path = os.path.join(self.tmp, "r." + fmt)
            p = sweep("report", self.out, "--format", fmt, "-o", path)
            self.assertEqual(p.returncode, 0, show(p))
            with open(path, encoding="utf-8") as f:
                out[fmt] = f.read()
        c = sweep("compare", self.out, self.out)
        out["compare"] = (c.returncode, c.stdout)
        e = sweep("export", self.out, "-o", "-")
        out["export"] = (e.returncode, e.stdout)
        return out, p.stderr + c.stderr + e.stderr

    def test_f_warm_record_cache_says_byte_for_byte_what_the_records_say(self):
        self.built_index()
        cache = os.path.join(self.out, "record-cache")
        # The cache off: a key file that is not the user's own (mode 0644).
        key = os.path.join(self.tmp, "state", "sweep", "key")
        os.makedirs(os.path.dirname(key), exist_ok=True)  # (made by the run's live report)
        shutil.rmtree(cache, ignore_errors=True)
        with open(key, "w", encoding="utf-8") as f:
            f.write("0" * 32 + "\n")
        os.chmod(key, 0o644)
        off, said = self.outputs()
        self.assertIn("record-cache: not used", said)
        self.assertIn("mode 0600", said)
        self.assertFalse(os.path.exists(cache))
        os.remove(key)
        cold, said = self.outputs()
        self.assertEqual(sorted(os.listdir(cache)), sorted(os.path.basename(os.path.dirname(r)) for r in self.records()))
        self.assertEqual(oct(os.stat(key).st_mode & 0o777), "0o600")
        warm, said = self.outputs()
        self.assertNotIn("record-cache", said)
        for name in off:
            self.assertEqual(cold[name], off[name], name)
            self.assertEqual(warm[name], off[name], name)
        self.assertIn("4 pairs: 4 identical", warm["compare"][1])

    def forge_cache_entry(self, record, after):
        """Rewrites the cache entry of `record`'s run to the file's new identity, with the
        XXH3-128 of its payload recomputed: all but the tag, which needs the user's key."""
        rid = os.path.basename(os.path.dirname(record))
        path = os.path.join(self.out, "record-cache", rid)
        with open(path, "rb") as f:
            b = bytearray(f.read())
        self.assertEqual(bytes(b[: len(MAGIC)]), MAGIC)
        n = len(MAGIC)
        struct.pack_into("<QQqqq", b, n, after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns)
        payload = bytes(b[n + 72:])
        h = xxhash.xxh3_128(payload).intdigest()
        struct.pack_into("<QQQ", b, n + 40, len(payload), h & (2**64 - 1), h >> 64)
        with open(path, "wb") as f:
            f.write(b)
        return rid

    def test_g_a_forged_record_cache_entry_never_hides_a_damaged_record(self):
        self.built_index()
        before, _ = self.outputs()
        self.assertIn("4 pairs: 4 identical", before["compare"][1])
        record = self.records()[1]
        rid = self.forge_cache_entry(record, self.damage(record))
        md = os.path.join(self.tmp, "forged.md")
        p = sweep("report", self.out, "--format", "md", "-o", md)
        self.assertEqual(p.returncode, 0, show(p))
        lines = [ln for ln in p.stderr.splitlines() if REFUSED in ln]
        self.assertEqual(len(lines), 1, show(p))
        self.assertIn("1 entry " + REFUSED, lines[0])
        with open(md, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("3 completed", text)
        self.assertRegex(text, rid + r".*damaged")
        after, said = self.outputs()
        self.assertNotIn(REFUSED, said, "said once: the refused entry was removed")
        self.assertEqual(after["compare"][0], 1)
        self.assertRegex(after["compare"][1], rid + r"  not compared: damaged in A, damaged in B")
        self.assertNotIn(rid, after["export"][1])
        self.assertEqual(after["export"][0], 0)

    def test_e_special_truncated_and_foreign_indexes(self):
        self.built_index()
        with open(self.index, encoding="utf-8") as f:
            good = f.read()
        cases = [("truncated", good[: len(good) // 2], "damaged"),
                 ("foreign", good.replace("sweep-index 3", "sweep-index 9", 1), "another version of sweep"),
                 ("empty", "", "truncated")]
        for name, text, why in cases:
            with open(self.index, "w", encoding="utf-8") as f:
                f.write(text)
            p = self.status("4 completed", why, REBUILT)
            self.assertEqual(sum(REBUILT in ln for ln in p.stderr.splitlines()), 1, name + "\n" + show(p))
        for name, make in (("fifo", os.mkfifo), ("directory", os.mkdir)):
            os.remove(self.index) if os.path.isfile(self.index) else None
            make(self.index)
            self.status("4 completed", "not a regular file", REBUILT)  # (cli_util's timeout: no hang)
            mode = os.lstat(self.index).st_mode
            self.assertTrue(stat.S_ISFIFO(mode) if name == "fifo" else stat.S_ISDIR(mode), name + " replaced")
            os.rmdir(self.index) if name == "directory" else os.remove(self.index)
        self.run_sweep("0 completed, 4 already done")


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
