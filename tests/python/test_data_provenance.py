#!/usr/bin/python3
"""Data provenance, driven by the real `sweep` and sweep-train: a run's record names its
data file by path, size, mtime and content hash; rewriting the file's contents (same size,
mtime set back) makes the completed run stale in `sweep plan`, `sweep reproduce` names the
data file as the cause, and `sweep run` keeps the old record aside and runs it again.

Usage: test_data_provenance.py [BIN_DIR] [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import xxhash
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
TEXT = ("the quick brown fox jumps over the lazy dog. " * 200).encode()


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class DataProvenance(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="data_provenance_test.")
        self.data = os.path.join(self.tmp, "corpus.txt")
        with open(self.data, "wb") as f:
            f.write(TEXT)
        g = {"name": "provenance",
             "base": {"model": {"layers": 1, "d_model": 32, "heads": 2, "vocab": 256, "seq_len": 16},
                      "data": {"kind": "text", "path": self.data},
                      "train": {"steps": 4, "micro_batch": 2}}}
        self.grid = os.path.join(self.tmp, "grid.yaml")
        with open(self.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sweep(self, *args):
        env = dict(os.environ, SWEEP_CACHE_DIR=os.path.join(self.tmp, "cache"))
        return subprocess.run([os.path.join(BIN_DIR, "sweep")] + list(args), capture_output=True, text=True,
                              timeout=300, env=env)

    def test_a_changed_data_file_makes_the_run_stale(self):
        p = self.sweep("run", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(self.out, "runs"))
        run = os.path.join(self.out, "runs", rid)
        old_hash = "xxh3:%016x" % xxhash.xxh3_64_intdigest(TEXT)
        with h5py.File(os.path.join(run, "record.h5"), "r") as f:
            e = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["environment"].attrs.items()}
        self.assertEqual(e["data.file"], os.path.realpath(self.data))
        self.assertEqual(e["data.size"], str(len(TEXT)))
        self.assertEqual(e["data.hash"], old_hash)
        self.assertEqual(int(e["data.mtime_ns"]), os.stat(self.data).st_mtime_ns)

        # Unchanged data: done, and planned as done.
        p = self.sweep("plan", self.grid, "--out", self.out)
        self.assertIn("(1 done, 0 to run)", p.stdout, show(p))

        # The same size, other bytes, the mtime set back: only the contents tell.
        st = os.stat(self.data)
        changed = TEXT.replace(b"quick", b"quack")
        with open(self.data, "r+b") as f:
            f.write(changed)
        os.utime(self.data, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual((os.stat(self.data).st_size, os.stat(self.data).st_mtime_ns), (st.st_size, st.st_mtime_ns))
        new_hash = "xxh3:%016x" % xxhash.xxh3_64_intdigest(changed)

        p = self.sweep("plan", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("(0 done, 1 to run)", p.stdout, show(p))
        self.assertRegex(p.stdout, r"(?m)^%s\s+stale\s" % rid, show(p))
        self.assertIn("stale %s: its data file %s changed since the run (%s, now %s)"
                      % (rid, os.path.realpath(self.data), old_hash, new_hash), p.stdout, show(p))

        p = self.sweep("reproduce", run)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("the data differ: %s (%s -> %s): the contents of the data file changed"
                      % (os.path.realpath(self.data), old_hash, new_hash), p.stdout, show(p))

        before = read_bytes(os.path.join(run, "record.h5"))
        p = self.sweep("run", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("changed since the run", p.stdout, show(p))
        aside = [n for n in os.listdir(run) if n.startswith("record.h5.stale-")]
        self.assertEqual(len(aside), 1, os.listdir(run))
        self.assertEqual(read_bytes(os.path.join(run, aside[0])), before)  # kept, byte for byte
        with h5py.File(os.path.join(run, "record.h5"), "r") as f:
            self.assertEqual(f["environment"].attrs["data.hash"], new_hash)
        p = self.sweep("run", self.grid, "--out", self.out)
        self.assertIn("already completed, skipped", p.stdout, show(p))


    def test_b_a_changed_held_out_file_makes_the_run_stale_too(self):
        """data.eval_path, given relative to the grid file: recorded by contents like the
        training file; rewriting it makes the run stale and reproduce names it."""
        held = os.path.join(self.tmp, "held.txt")
        with open(held, "wb") as f:
            f.write(TEXT[:2000])
        with open(self.grid, encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g["base"]["data"]["eval_path"] = "held.txt"  # next to grid.yaml, whatever the working directory
        g["base"]["train"]["eval_batches"] = 1
        with open(self.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        p = self.sweep("run", self.grid, "--out", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(self.out, "runs"))
        run = os.path.join(self.out, "runs", rid)
        with h5py.File(os.path.join(run, "record.h5"), "r") as f:
            self.assertEqual(f["environment"].attrs["data.eval_file"], os.path.realpath(held))
            self.assertEqual(list(f["eval/step"][:]), [4], "one evaluation, after the last step")
        st = os.stat(held)
        with open(held, "r+b") as f:
            f.write(TEXT[:2000].replace(b"quick", b"quack"))  # inside the evaluated sequences
        os.utime(held, ns=(st.st_atime_ns, st.st_mtime_ns))
        p = self.sweep("plan", self.grid, "--out", self.out)
        self.assertIn("stale %s: its held-out data file %s changed since the run" % (rid, os.path.realpath(held)),
                      p.stdout, show(p))
        p = self.sweep("reproduce", run)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("the contents of the held-out data file changed", p.stdout, show(p))
        self.assertIn("training identical bit-for-bit (4 steps, 5 checksums), but the held-out loss differs after step 4",
                      p.stdout, show(p))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
