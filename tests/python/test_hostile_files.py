"""Files a run's program (or anyone) plants where sweep reads, with the real binaries
(issue 54). Each case hung, crashed or fooled a reader before:

a. logs/rank0.log replaced by a FIFO: `sweep run`, `status` and `report` wedged in open().
b. logs/rank0.log a link to /dev/zero: `report` allocated until bad_alloc.
c. the record-cache key ($XDG_STATE_HOME/sweep/key) a FIFO: every sweep-wide reader hung.
d. flipped bits in a completed record: `report`, `export` and `compare DIR DIR` segfaulted
   inside the HDF5 library (attribute iteration) for the whole sweep. The driver notes the
   record's bytes in accepted/<id>, outside the run directory, and every reader checks them
   before HDF5 parses anything: the record is damaged, nothing else is, nothing crashes.
e. record.h5 and the state's digest line both rewritten after the run completed (what a
   process that escaped the run's tree did): the record is not verified, because the
   driver's note in accepted/<id> is outside the run directory.
f. RUN_DIR/reproduce planted as a link to `..`: `sweep reproduce` wrote its re-run into the
   sweep's runs/ as if it were a run of the sweep.
g. a decompression bomb: metrics/loss declared as 10^9 doubles (8 GB), one compressed chunk
   of zeros stored. Every reader calls the record damaged before allocating anything.
"""

import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
from programs_util import program_grid, write_program  # noqa: E402

PROGRAM = r'''
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
mode = dict(pairs)["model.mode"]
log = os.path.join(out if os.path.isdir(out) else os.path.dirname(out), "logs", "rank0.log")
print("training in mode " + mode, flush=True)
if mode in ("fifo_log", "zero_log"):  # swap the log for a file that never ends, then fail
    os.remove(log)
    if mode == "fifo_log":
        os.mkfifo(log)
    else:
        os.symlink("/dev/zero", log)
    sys.exit(3)
with TinyRecord(out, text, pairs) as r:
    for step in (1, 2):
        r.step(step, loss=1.0 / step, lr=0.001)
        r.checksum(step)
    r.finish()
if mode == "plant_reproduce":  # where sweep reproduce puts its re-runs: the sweep's runs/
    os.symlink("..", os.path.join(out, "reproduce"))
'''

# A reader that does not come back within this many seconds is hung (each takes well
# under a second on two cores).
HANG_S = 60


class HostileFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hostile_files_test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.script = write_program(os.path.join(self.tmp, "prog.py"), PROGRAM)
        self.saved_state_home = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")  # this test's own cache key
        self.addCleanup(self.restore_state_home)

    def restore_state_home(self):
        if self.saved_state_home is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = self.saved_state_home

    def grid(self, modes, name):
        return program_grid(os.path.join(self.tmp, name + ".yaml"), name, self.script, "hostile",
                            {"train": {"steps": 2, "threads": 1}}, grid={"model.mode": modes},
                            modes=["ok", "other", "fifo_log", "zero_log", "plant_reproduce"])

    def bounded(self, *args):
        """`sweep ARGS`, failing the test (not hanging it) when it does not come back."""
        try:
            return subprocess.run([os.path.join(cli_util.BIN_DIR, "sweep")] + list(args), capture_output=True,
                                  text=True, timeout=HANG_S, env=cli_util.program_env())
        except subprocess.TimeoutExpired:
            self.fail("sweep %s did not come back within %d s" % (" ".join(args), HANG_S))

    def readers(self, out):
        """Every sweep-wide reader over `out`: the processes' exits (none may crash)."""
        exits = {}
        for fmt in ("md", "html", "json", "csv"):
            p = self.bounded("report", out, "--format", fmt, "-o", os.path.join(self.tmp, "report." + fmt))
            exits["report " + fmt] = p
        exits["export"] = self.bounded("export", out, "-o", os.path.join(self.tmp, "export.csv"))
        exits["compare"] = self.bounded("compare", out, out)
        exits["status"] = self.bounded("status", out)
        for name, p in exits.items():
            self.assertGreaterEqual(p.returncode, 0, name + " died of a signal\n" + show(p))
            self.assertLess(p.returncode, 100, name + "\n" + show(p))
        return exits

    def test_a_b_logs_that_never_end(self):
        out = os.path.join(self.tmp, "logs")
        p = self.bounded("run", self.grid(["ok", "fifo_log", "zero_log"], "logs"), "--out", out)
        self.assertNotEqual(p.returncode, 0, show(p))  # two runs failed
        self.assertIn("1 completed", p.stdout, show(p))
        kinds = sorted(stat.S_IFMT(os.lstat(os.path.join(out, "runs", r, "logs", "rank0.log")).st_mode)
                       for r in os.listdir(os.path.join(out, "runs")))
        self.assertIn(stat.S_IFIFO, kinds)  # the planted files are there as the readers run
        self.assertIn(stat.S_IFLNK, kinds)
        exits = self.readers(out)
        self.assertEqual(exits["report md"].returncode, 0, show(exits["report md"]))
        with open(os.path.join(self.tmp, "report.md"), encoding="utf-8") as f:
            self.assertNotIn("\0", f.read())  # not a byte of /dev/zero in the report

    def test_c_a_fifo_as_the_cache_key(self):
        out = os.path.join(self.tmp, "key")
        p = sweep("run", self.grid(["ok"], "key"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        key = os.path.join(self.tmp, "state", "sweep", "key")
        os.remove(key)
        os.mkfifo(key, 0o600)
        exits = self.readers(out)
        self.assertEqual(exits["report md"].returncode, 0, show(exits["report md"]))
        p = self.bounded("run", self.grid(["ok"], "key"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))

    def test_d_flipped_bits_make_one_record_damaged_and_crash_nothing(self):
        out = os.path.join(self.tmp, "flips")
        p = sweep("run", self.grid(["ok", "other"], "flips"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        runs = sorted(os.listdir(os.path.join(out, "runs")))
        victim = os.path.join(out, "runs", runs[0], "record.h5")
        with open(victim, "rb") as f:
            good = f.read()
        # Where flips crashed HDF5 before: the bytes after each attribute's name (its
        # message's datatype and dataspace), then positions all over the file.
        positions = set()
        for name in (b"determinism", b"environment", b"schema_version", b"digest", b"summary"):
            at = good.find(name)
            if at >= 0:
                positions.update(range(at, min(len(good), at + 48), 3))
        rng = random.Random(54)
        positions.update(rng.randrange(len(good)) for _ in range(40))
        for pos in sorted(positions):
            bad = bytearray(good)
            bad[pos] ^= 1 << rng.randrange(8)
            with open(victim, "r+b") as f:
                f.write(bad)
            exits = self.readers(out)
            md = exits["report md"]
            self.assertEqual(md.returncode, 0, "flip at byte %d\n%s" % (pos, show(md)))
            with open(os.path.join(self.tmp, "report.md"), encoding="utf-8") as f:
                text = f.read()
            self.assertIn("1 completed", text.replace("**", ""), "flip at byte %d" % pos)  # the other run
            self.assertIn("bytes are not those the driver accepted", exits["status"].stdout + text,
                          "flip at byte %d" % pos)
        with open(victim, "wb") as f:
            f.write(good)
        exits = self.readers(out)
        self.assertEqual(exits["compare"].returncode, 0, show(exits["compare"]))

    def test_e_a_record_and_state_rewritten_after_completion_are_not_verified(self):
        out = os.path.join(self.tmp, "forge")
        p = sweep("run", self.grid(["ok"], "forge"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        run = os.path.join(out, "runs", os.listdir(os.path.join(out, "runs"))[0])
        record = os.path.join(run, "record.h5")
        # A forged loss, digest recomputed the way any reader can (via sweep_record), and
        # the state's digest line rewritten to match: all inside the run directory.
        with h5py.File(record, "r+") as f:
            f["metrics"]["loss"][1] = 0.001
        import sweep_record as sr  # noqa: E402  (python/, as a forging program has it)
        with h5py.File(record, "r+") as f:
            forged = sr.record_digest(f)
            f.attrs["digest"] = forged
        state = os.path.join(run, "state")
        with open(state, encoding="utf-8") as f:
            lines = [ln if not ln.startswith("digest: ") else "digest: " + forged + "\n" for ln in f]
        with open(state, "w", encoding="utf-8") as f:
            f.writelines(lines)
        q = self.bounded("status", out)
        self.assertIn("damaged", q.stdout, show(q))
        self.assertNotIn("1 completed", q.stdout, show(q))
        q = self.bounded("show", run)
        self.assertRegex(q.stdout, r"(?m)^verdict: +DAMAGED: .*its bytes are not those the driver accepted", show(q))
        p = self.bounded("run", self.grid(["ok"], "forge"), "--out", out)  # not skipped: re-run
        self.assertIn("1 completed, 0 already done", p.stdout, show(p))


    def test_f_a_planted_reproduce_link_is_refused(self):
        out = os.path.join(self.tmp, "planted")
        p = sweep("run", self.grid(["plant_reproduce"], "planted"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        run = os.path.join(out, "runs", rid)
        self.assertTrue(os.path.islink(os.path.join(run, "reproduce")))
        p = self.bounded("reproduce", run)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
        self.assertIn(run + "/reproduce is a symbolic link, not a directory of its own", p.stderr, show(p))
        self.assertEqual(os.listdir(os.path.join(out, "runs")), [rid], "reproduce wrote into the sweep's runs/")


    def test_g_a_decompression_bomb_is_damage_not_an_allocation(self):
        out = os.path.join(self.tmp, "bomb")
        p = sweep("run", self.grid(["ok"], "bomb"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        record = os.path.join(out, "runs", rid, "record.h5")
        with h5py.File(record, "r+") as f:
            del f["metrics"]["loss"]
            d = f["metrics"].create_dataset("loss", shape=(10 ** 9,), dtype="f8", chunks=(1 << 20,),
                                            compression="gzip", compression_opts=9)
            d[0:1 << 20] = 0.0
            stored = d.id.get_storage_size()
        self.assertLess(stored, 1 << 20)  # 8 GB declared over a few kB
        os.remove(os.path.join(out, "accepted", rid))  # past the byte check, to the parser's own
        said = "dataset 'loss' declares 1000000000 elements but stores %d bytes" % stored
        exits = self.readers(out)
        self.assertIn(said, exits["status"].stdout, show(exits["status"]))
        q = self.bounded("show", os.path.join(out, "runs", rid))
        self.assertIn(said, q.stdout + q.stderr, show(q))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
