#!/usr/bin/python3
"""The box a grid's program runs in (sweep-confine, Landlock), attacked from inside by a
Python program, with the sweep directory under /tmp, under /dev/shm, under the home
directory (no scratch place) and reached through a symbolic link:

a. it cannot write its own sweep directory (points.tsv, runs/) nor another run's, nor
   create files in /dev, and cannot signal its driver; it can write its run directory,
   TMPDIR and the scratch places that do not hold the sweep; its record says what held it;
b. a RUN_DIR/tmp replaced by a link (to the sweep directory) before a retry grants nothing:
   the retry is refused, naming the link;
c. a link planted as runs/<id> or as runs/: nothing is written through it.

Usage: test_confine.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import errno
import json
import os
import shutil
import sys
import tempfile
import unittest

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, show, sweep  # noqa: E402
from programs_util import program_grid, write_program  # noqa: E402

# Writes what each attack did to RUN_DIR/attacks.json, then a valid record (so the run
# completes and the test reads what happened); model.mode "plant_tmp" instead replaces
# RUN_DIR/tmp with a link to the sweep directory on its first attempt and fails.
ATTACK = r'''
import errno, json, signal
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
cfg = dict(pairs)
sweep_dir = os.path.dirname(os.path.dirname(out))
if cfg["model.mode"] == "plant_tmp":
    marker = os.path.join(out, "planted")
    if not os.path.exists(marker):
        open(marker, "w").close()
        tmp = os.path.join(out, "tmp")
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            os.rmdir(tmp)
        os.symlink(sweep_dir, tmp)
        sys.exit("planted a link as RUN_DIR/tmp")
    # A retry that got this far: the link would grant the sweep directory.
    with open(os.path.join(os.environ.get("TMPDIR", "/nonexistent"), "PLANTED_THROUGH_TMP"), "w") as f:
        f.write("x")
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
def append(path):
    with open(path, "a") as f:
        f.write("written by the program\n")
attempt("points.tsv", lambda: append(os.path.join(sweep_dir, "points.tsv")))
attempt("runs/PLANTED", lambda: append(os.path.join(sweep_dir, "runs", "PLANTED_BY_PROGRAM")))
attempt("sweep/PLANTED", lambda: append(os.path.join(sweep_dir, "PLANTED_BY_PROGRAM")))
attempt("own run", lambda: append(os.path.join(out, "mine.txt")))
attempt("TMPDIR", lambda: append(os.path.join(os.environ.get("TMPDIR", "/tmp"), "scratch-%d.txt" % os.getpid())))
attempt("/tmp", lambda: append("/tmp/sweep-confine-test-%d.txt" % os.getpid()))
attempt("/dev/shm", lambda: append("/dev/shm/sweep-confine-test-%d.txt" % os.getpid()))
attempt("/dev/null", lambda: append("/dev/null"))
attempt("/dev/new", lambda: append("/dev/sweep-confine-test-%d" % os.getpid()))
# SIGCONT: harmless to a driver that is not stopped, refused where signals are scoped.
attempt("signal driver", lambda: os.kill(os.getppid(), signal.SIGCONT))
for name in ("/tmp", "/dev/shm"):
    if results[name] == "ok":
        os.unlink(("/tmp" if name == "/tmp" else "/dev/shm") + "/sweep-confine-test-%d.txt" % os.getpid())
results["TMPDIR value"] = os.environ.get("TMPDIR", "")
with open(os.path.join(out, "attacks.json"), "w") as f:
    json.dump(results, f)
with TinyRecord(out, text, pairs) as r:
    r.step(1, loss=1.0, lr=0.1)
    r.checksum(1)
    r.finish()
'''


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def landlock_abi():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)


class Box(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.abi = landlock_abi()
        if cls.abi < 1:
            raise unittest.SkipTest("this kernel has no Landlock: programs run unconfined (and say so)")
        cls.work = tempfile.mkdtemp(prefix="confine_test.")
        cls.script = write_program(os.path.join(cls.work, "attack.py"), ATTACK)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def grid(self, modes, retries=0):
        return program_grid(os.path.join(self.work, "box-%d.yaml" % len(os.listdir(self.work))), "box", self.script,
                            "attack", {"train": {"steps": 1, "threads": 1}}, grid={"model.mode": modes},
                            modes=["attack", "plant_tmp", "other"], default="attack",
                            launch={"retries": {"crashed": retries}} if retries else None)

    def place(self, where):
        """A new directory under `where`, removed after the test."""
        d = tempfile.mkdtemp(prefix="confine_test.", dir=where)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def attack_from(self, out, tmp_is_own):
        p = sweep("run", self.grid(["attack", "other"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        real = os.path.realpath(out)
        points = read_bytes(os.path.join(real, "points.tsv"))
        self.assertNotIn(b"written by the program", points)
        self.assertFalse(os.path.exists(os.path.join(real, "runs", "PLANTED_BY_PROGRAM")))
        self.assertFalse(os.path.exists(os.path.join(real, "PLANTED_BY_PROGRAM")))
        runs = sorted(os.listdir(os.path.join(real, "runs")))
        self.assertEqual(len(runs), 2, runs)
        for rid in runs:
            with open(os.path.join(real, "runs", rid, "attacks.json"), encoding="utf-8") as f:
                a = json.load(f)
            self.assertEqual(a["points.tsv"], "EACCES", (out, a))
            self.assertEqual(a["runs/PLANTED"], "EACCES", (out, a))
            self.assertEqual(a["sweep/PLANTED"], "EACCES", (out, a))
            self.assertEqual(a["own run"], "ok", (out, a))
            self.assertEqual(a["TMPDIR"], "ok", (out, a))
            self.assertEqual(a["/dev/null"], "ok", (out, a))
            self.assertEqual(a["/dev/new"], "EACCES", (out, a))
            if tmp_is_own:
                self.assertEqual(os.path.realpath(a["TMPDIR value"]),
                                 os.path.join(real, "runs", rid, "tmp"), (out, a))
            if self.abi >= 6:
                self.assertEqual(a["signal driver"], "EPERM", (out, a))
            with h5py.File(os.path.join(real, "runs", rid, "record.h5"), "r") as f:
                held = text(f["environment"].attrs["program.confinement"])
            self.assertTrue(held.startswith("landlock-abi-%d: writes" % self.abi), held)
            self.assertEqual(held.endswith(", signals"), self.abi >= 6, held)
        return a

    def test_a_sweep_under_tmp(self):
        a = self.attack_from(os.path.join(self.place("/tmp"), "out"), tmp_is_own=True)
        self.assertEqual(a["/tmp"], "EACCES", a)  # /tmp holds the sweep: withheld
        self.assertEqual(a["/dev/shm"], "ok", a)

    def test_a_sweep_under_dev_shm(self):
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm")
        a = self.attack_from(os.path.join(self.place("/dev/shm"), "out"), tmp_is_own=True)
        self.assertEqual(a["/dev/shm"], "EACCES", a)  # /dev/shm holds the sweep: withheld
        self.assertEqual(a["/tmp"], "ok", a)

    def test_a_sweep_under_home(self):
        home = os.path.expanduser("~")
        if not os.access(home, os.W_OK):
            self.skipTest("the home directory is not writable")
        a = self.attack_from(os.path.join(self.place(home), "out"), tmp_is_own=False)
        self.assertEqual(a["/tmp"], "ok", a)
        self.assertEqual(a["/dev/shm"], "ok", a)

    def test_a_sweep_reached_through_a_link(self):
        # A link outside /tmp to a sweep directory inside it: the grant of /tmp must not
        # cover it because the path the driver was given does not start with /tmp.
        real = os.path.join(self.place("/tmp"), "out")
        os.makedirs(real)
        link = os.path.join(self.place(os.path.dirname(os.path.abspath(cli_util.BIN_DIR))), "link")
        os.symlink(real, link)
        a = self.attack_from(link, tmp_is_own=True)
        self.assertEqual(a["/tmp"], "EACCES", a)
        # And with ".." in the path.
        real2 = os.path.join(self.place("/tmp"), "out")
        dotted = os.path.join("/var", "..", os.path.relpath(real2, "/"))
        self.attack_from(dotted, tmp_is_own=True)

    def test_b_a_tmp_replaced_by_a_link_is_refused_on_the_retry(self):
        out = os.path.join(self.place("/tmp"), "out")
        p = sweep("run", self.grid(["plant_tmp"], retries=1), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        self.assertFalse(os.path.exists(os.path.join(out, "PLANTED_THROUGH_TMP")), show(p))
        with open(os.path.join(out, "runs", rid, "state"), encoding="utf-8") as f:
            state = f.read()
        self.assertIn("state: failed", state)
        self.assertIn("/tmp is a symbolic link", state)
        # sweep-confine refuses it too, for a caller other than the driver.
        confine = os.path.join(cli_util.BIN_DIR, "sweep-confine")
        q = cli_util.run([confine, "--run", os.path.join(out, "runs", rid), "--scratch", "/tmp", "--",
                          "/bin/true"])
        self.assertEqual(q.returncode, 2, show(q))
        self.assertIn("tmp: not a directory (a link or a file in its place)", q.stderr)

    def test_c_planted_links_for_runs_are_never_written_through(self):
        out = self.place("/tmp")
        elsewhere = self.place("/tmp")
        p = sweep("run", self.grid(["attack"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        # runs/<id> replaced by a link to an empty directory: the run fails naming it, and
        # nothing (not even its state) is written in the link's target.
        shutil.rmtree(os.path.join(out, "runs", rid))
        os.symlink(elsewhere, os.path.join(out, "runs", rid))
        p = sweep("run", self.grid(["attack"]), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("is a symbolic link, not a directory of its own", p.stdout, show(p))
        self.assertEqual(os.listdir(elsewhere), [], show(p))
        # runs/ itself a link: refused before anything starts (exit 2), nothing written.
        os.unlink(os.path.join(out, "runs", rid))
        os.rename(os.path.join(out, "runs"), os.path.join(out, "runs.old"))
        os.symlink(elsewhere, os.path.join(out, "runs"))
        p = sweep("run", self.grid(["attack"]), "--out", out)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("runs is a symbolic link", p.stderr, show(p))
        self.assertEqual(os.listdir(elsewhere), [], show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
