#!/usr/bin/python3
"""A grid's `program:` section, driven by the real `sweep` binary:

a. tests/programs/linreg (C++, the record writer of include/sweep/record_writer.h, no
   trainer, no LibTorch) sweeps 4 runs; its records pass h5py's schema check, name the
   program, and reproduce bit for bit; a changed key makes reproduce exit 1 naming the step.
b. what a program sees: its argv, SWEEP_CONFIG, SWEEP_RUN_DIR, SWEEP_RUN_ID, the numerics
   variables (recorded too), its working directory; the declared keys in its config file.
c. programs that misbehave (a Python program over python/sweep_record): another run id, a
   newer schema version, a missing dataset, no record, a record that does not name the
   program: each run fails with its cause, and a completed run of the same sweep is not
   touched.
d. bad grids: exit 2 naming the grid file and key, nothing written.

Usage: test_program.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep and linreg.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, run, show, sweep  # noqa: E402
from programs_util import program_grid, runs_by_mode, write_program  # noqa: E402
from test_record_writer import load_h5py_checks  # noqa: E402  (h5py_reads_record.py's schema check)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


LINREG_KEYS = {
    "features": {"type": "int", "default": 16, "min": 1, "max": 4096, "help": "input features"},
    "noise": {"type": "real", "default": 0.1, "min": 0, "max": 10},
    "flaw": {"type": "int", "default": 0, "min": 0, "max": 1000000, "help": "perturbs the data from this step on"},
}

# A program over python/sweep_record that does what model.mode says after a correct run.
MISBEHAVE = r'''
import json
import numpy as np
import h5py
import sweep_record as sr
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
seen = {"argv": sys.argv, "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("SWEEP_") or k in sr.NUMERICS_ENV}}
with open(os.path.join(out, "seen.json"), "w") as f:
    json.dump(seen, f)
cfg = dict(pairs)
mode = cfg["model.mode"]
if mode == "no_record":
    sys.exit(0)
if mode == "outside":  # the sweep directory, two levels up: another place than its own
    with open(os.path.join(out, "..", "..", "stray.txt"), "w") as f:
        f.write("written outside the run directory\n")
if mode == "claims_unconfined":  # tries the sweep directory, and claims to have run unconfined
    try:
        with open(os.path.join(out, "..", "..", "stray.txt"), "w") as f:
            f.write("written outside the run directory\n")
    except OSError:
        pass
run_id = sr.run_id_of(text) if mode != "wrong_id" else "0123456789abcdef"
environment = {} if mode != "no_program" else {"program": ""}
if mode == "claims_unconfined":
    environment = {"program.writes": "off", "program.pass_args": "true", "program.cwd": "/"}
with TinyRecord(out, text, pairs, run_id=run_id, environment=environment) as r:
    steps = {"no_steps": (), "past_steps": (1, 2, 3), "steps_back": (2, 1)}.get(mode, (1, 2))
    for step in steps:
        r.step(step, loss=1.0 / step, lr=0.1)
    r.checksum(2)
    r.finish()
rec = os.path.join(out, "record.h5")
if mode == "newer_schema":
    with h5py.File(rec, "r+") as f:
        f.attrs["schema_version"] = np.int64(99)
elif mode == "missing_dataset":
    with h5py.File(rec, "r+") as f:
        del f["metrics/loss"]
'''


class LinregProgram(unittest.TestCase):
    """a. A C++ program that writes records with the library alone."""

    @classmethod
    def setUpClass(cls):
        cls.linreg = os.path.join(cli_util.BIN_DIR, "linreg")
        for b in ("sweep", "linreg"):
            if not os.access(os.path.join(cli_util.BIN_DIR, b), os.X_OK):
                raise AssertionError("%s is not in %s (build it, or pass the bin dir)" % (b, cli_util.BIN_DIR))
        cls.tmp = tempfile.mkdtemp(prefix="program_test.")
        cls.grid = os.path.join(cls.tmp, "linreg.yaml")
        g = {"name": "linreg", "program": {"argv": [cls.linreg], "kind": "linreg", "keys": LINREG_KEYS},
             "base": {"train": {"steps": 30, "micro_batch": 8, "accum": 2, "lr": 0.05, "checksum_every": 5}},
             "grid": {"train.lr": [0.05, 0.1]}, "seeds": 2}
        with open(cls.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        cls.dir = os.path.join(cls.tmp, "out")
        cls.result = sweep("run", cls.grid, "--out", cls.dir)
        cls.ids = sorted(os.listdir(os.path.join(cls.dir, "runs"))) if os.path.isdir(cls.dir) else []

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP_TMP"): shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_dir(self, i):
        self.assertEqual(self.result.returncode, 0, show(self.result))
        return os.path.join(self.dir, "runs", self.ids[i])

    def test_a1_sweep_and_records(self):
        self.assertEqual(self.result.returncode, 0, show(self.result))
        self.assertIn("4 completed", self.result.stdout, show(self.result))
        checks = load_h5py_checks()
        for rid in self.ids:
            failures = []
            with h5py.File(os.path.join(self.dir, "runs", rid, "record.h5"), "r") as f:
                self.assertEqual(text(f.attrs["run_id"]), rid)
                self.assertEqual(text(f.attrs["status"]), "completed")
                e = {k: text(v) for k, v in f["environment"].attrs.items()}
                self.assertEqual(json.loads(e["program"]), [self.linreg])
                self.assertRegex(e["program.digest"], r"^xxh3:[0-9a-f]{16}$")
                self.assertEqual(yaml.safe_load(e["program.keys"])["models"][0]["kind"], "linreg")
                self.assertEqual(e["env.PYTHONHASHSEED"], "0")
                self.assertEqual(e["env.OMP_NUM_THREADS"], "1")
                self.assertEqual(text(f.attrs["digest"]), checks["record_digest"](f))
                # The C++ writer records a program's own figures and held-out rows too
                # (schema version 4), as the Python API does.
                self.assertEqual(int(f.attrs["schema_version"]), 4)
                steps = len(f["metrics/step"])
                self.assertEqual(len(f["metrics/extra/weight_error"]), steps)
                self.assertGreater(len(f["eval/step"]), 0)
                self.assertEqual(len(f["eval/extra/within_0.1"]), len(f["eval/step"]))
                checks["check_schema_doc"](f, lambda ok, what: ok or failures.append(what))
            self.assertEqual(failures, [], rid)

    def test_a2_reproduce_bit_for_bit(self):
        p = sweep("reproduce", self.run_dir(0))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 30 steps, 7 checksums", p.stdout, show(p))
        self.assertIn("environment: identical", p.stdout, show(p))

    def test_a2b_reproduce_runs_only_a_program_its_sweep_declared(self):
        p = sweep("reproduce", self.run_dir(0))
        self.assertIn("program: " + self.linreg, p.stdout, show(p))  # the command it ran, said
        # The run directory copied out of its sweep: no grid there declared the program.
        copy = os.path.join(self.tmp, "copied", self.ids[0])
        shutil.copytree(self.run_dir(0), copy, ignore=shutil.ignore_patterns("reproduce"))
        p = sweep("reproduce", copy)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("which no grid run in a sweep directory holding the record declared", p.stderr, show(p))
        self.assertIn("--allow-program", p.stderr, show(p))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
        self.assertFalse(os.path.exists(os.path.join(copy, "reproduce")), "nothing is started or made")
        p = sweep("reproduce", copy, "--allow-program")
        self.assertEqual(p.returncode, 0, show(p))
        # A valid record, written by anyone, that names a shell command inside a sweep
        # directory whose grids never declared it: refused, and the command never runs.
        forged = os.path.join(self.tmp, "forged")
        mark = os.path.join(self.tmp, "FORGED_COMMAND_RAN")
        rid = self.ids[0]
        os.makedirs(os.path.join(forged, "runs", rid))
        shutil.copy2(os.path.join(self.dir, "programs"), os.path.join(forged, "programs"))
        config = os.path.join(self.run_dir(0), "config.yaml")
        writer = (
            "import sys, numpy as np, sweep_record as sr\n"
            "sys.path.insert(0, %r)\n"
            "from cli_util import read_run_config\n"
            "text, pairs = read_run_config(%r)\n"
            "params = [('w', np.zeros(2, dtype=np.float32))]\n"
            "with sr.RecordWriter(%r, run_id=sr.run_id_of(text), config_yaml=text, config=pairs,\n"
            "                     params=[(n, a.shape) for n, a in params]) as w:\n"
            "    w.append_checksum(0, *sr.checksums_of(params))\n"
            "    w.append_step({'step': 1, 'loss': 1.0, 'lr': 0.1, 'grad_norm': 1.0, 'tokens': 8})\n"
            "    w.append_rank_times([0.01])\n"
            "    w.finish()\n") % (HERE, config, os.path.join(forged, "runs", rid))
        env = cli_util.program_env()
        env["SWEEP_PROGRAM"] = json.dumps(["/bin/sh", "-c", "touch " + mark])
        q = subprocess.run(["/usr/bin/python3", "-c", writer], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(q.returncode, 0, show(q))
        p = sweep("reproduce", os.path.join(forged, "runs", rid))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("the record names the program [\"/bin/sh\", \"-c\"", p.stderr, show(p))
        self.assertIn("which no grid run in the sweep directory " + forged + " declared", p.stderr, show(p))
        self.assertFalse(os.path.exists(mark), "the forged record's command ran")

    def test_a3_a_changed_key_is_named(self):
        p = sweep("reproduce", self.run_dir(1), "--set", "model.flaw=12")
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("diverged at step 12:", p.stdout, show(p))
        self.assertIn("first differing parameter: w (checksums at step 15)", p.stdout, show(p))

    def test_a4_report_and_compare(self):
        p = sweep("report", self.dir, "--format", "csv", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        rows = p.stdout.strip().splitlines()
        self.assertEqual(sorted(r.split(",")[0] for r in rows[1:]), self.ids)
        p = sweep("compare", self.run_dir(0), self.run_dir(2))  # the same lr, another seed
        self.assertEqual(p.returncode, 1, show(p))

    def test_a5_program_replaced_under_the_record(self):
        # The program's file changed since the record: reproduce says so in the environment.
        copy = os.path.join(self.tmp, "linreg-copy")
        shutil.copy2(self.linreg, copy)
        g = yaml.safe_load(read_text(self.grid))
        g["program"]["argv"] = [copy]
        g["grid"] = {"train.lr": [0.05]}
        g["seeds"] = 1
        grid = os.path.join(self.tmp, "copy.yaml")
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        out = os.path.join(self.tmp, "copy-out")
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        with open(copy, "ab") as f:
            f.write(b"\0")  # the same program, other bytes
        p = sweep("reproduce", os.path.join(out, "runs", rid))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertRegex(p.stdout, r"(?m)^environment program\.digest: xxh3:\w+ -> xxh3:\w+$", show(p))
        # A changed program is stale, like a changed data file: plan names it, run keeps
        # the old record aside and trains the run again with the program as it is now.
        with h5py.File(os.path.join(out, "runs", rid, "record.h5"), "r") as f:
            old = text(f["environment"].attrs["program.digest"])
        p = sweep("plan", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("(0 done, 1 to run)", p.stdout, show(p))
        self.assertRegex(p.stdout, r"(?m)^stale %s: its program file %s \(was %s, now xxh3:[0-9a-f]{16}\) changed "
                         r"since the run: `sweep run` keeps its record and checkpoints aside"
                         % (rid, re.escape(copy), old), show(p))
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("1 completed", p.stdout, show(p))
        kept = [n for n in os.listdir(os.path.join(out, "runs", rid)) if n.startswith("record.h5.stale-")]
        self.assertEqual(len(kept), 1, os.listdir(os.path.join(out, "runs", rid)))
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(1 done, 0 to run)", p.stdout, show(p))
        os.unlink(copy)
        p = sweep("reproduce", os.path.join(out, "runs", rid))
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("not found or not executable", p.stderr, show(p))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))


class MisbehavingPrograms(unittest.TestCase):
    """b, c. What a program gets, and what the driver does with a bad record."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="program_misbehave_test.")
        cls.script = write_program(os.path.join(cls.tmp, "prog", "misbehave.py"), MISBEHAVE)
        cls.dir = os.path.join(cls.tmp, "out")

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP_TMP"): shutil.rmtree(cls.tmp, ignore_errors=True)

    def grid(self, modes, name="misbehave", **program):
        return program_grid(os.path.join(self.tmp, name + ".yaml"), name, "prog/misbehave.py", "misbehave",
                            {"train": {"steps": 2, "threads": 2}}, grid={"model.mode": modes}, program=program,
                            modes=["ok", "wrong_id", "newer_schema", "missing_dataset", "no_record", "no_program",
                                   "outside", "claims_unconfined", "no_steps", "past_steps", "steps_back"])

    def states(self, out):
        s = {}
        for mode, rid in runs_by_mode(out).items():
            with open(os.path.join(out, "runs", rid, "state"), encoding="utf-8") as f:
                s[mode] = (rid, f.read())
        return s

    def test_b_what_the_program_sees(self):
        out = os.path.join(self.tmp, "sees")
        p = sweep("run", self.grid(["ok"], "sees"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        d = os.path.join(out, "runs", rid)
        seen = read_json(os.path.join(d, "seen.json"))
        script = os.path.join(self.tmp, "prog", "misbehave.py")
        self.assertEqual(seen["argv"][0], script)  # python3 -u SCRIPT: the path made absolute
        self.assertEqual(seen["argv"][1:5], ["--config", d + "/config.yaml", "--out", d])
        e = seen["env"]
        self.assertEqual(e["SWEEP_CONFIG"], d + "/config.yaml")
        self.assertEqual(e["SWEEP_RUN_DIR"], d)
        self.assertEqual(e["SWEEP_RUN_ID"], rid)
        self.assertEqual(json.loads(e["SWEEP_PROGRAM"]), ["/usr/bin/python3", "-u", script])
        self.assertEqual(e["PYTHONHASHSEED"], "0")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            self.assertEqual(e[var], "2", var)  # train.threads
        self.assertEqual(e["CUBLAS_WORKSPACE_CONFIG"], ":4096:8")
        with h5py.File(os.path.join(d, "record.h5"), "r") as f:
            self.assertEqual(text(f["environment"].attrs["env.OMP_NUM_THREADS"]), "2")
            self.assertEqual(text(f["environment"].attrs["program"]), e["SWEEP_PROGRAM"])
        self.assertIn("  mode: ok\n", read_text(os.path.join(d, "config.yaml")))

    def test_c_bad_records_fail_their_run_and_touch_nothing_completed(self):
        out = self.dir
        p = sweep("run", self.grid(["ok"]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        ok_id = self.states(out)["ok"][0]
        ok_record = os.path.join(out, "runs", ok_id, "record.h5")
        before = read_bytes(ok_record), os.stat(ok_record).st_mtime_ns
        modes = ["ok", "wrong_id", "newer_schema", "missing_dataset", "no_record", "no_program", "no_steps",
                 "past_steps", "steps_back"]
        p = sweep("run", self.grid(modes), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("0 completed, 1 already done, 8 failed", p.stdout, show(p))
        self.assertEqual((read_bytes(ok_record), os.stat(ok_record).st_mtime_ns), before)
        st = self.states(out)
        expect = {"wrong_id": "names run '0123456789abcdef'", "newer_schema": "exit code 0 but an invalid record",
                  "missing_dataset": "exit code 0 but an invalid record", "no_record": "exit code 0 but no record",
                  "no_program": "the record does not name the program that ran",
                  "no_steps": "record.h5 is completed but holds no training step",
                  "past_steps": "record.h5 records step 3, beyond its config's train.steps 2",
                  "steps_back": "append_step: step 1 after step 2"}  # the Python writer refuses it first
        for mode, needle in expect.items():
            rid, state = st[mode]
            self.assertIn("failed", state, (mode, state))
            self.assertIn(needle, state, (mode, state))
        self.assertIn("schema", st["newer_schema"][1])
        self.assertIn("moved aside", st["no_program"][1])
        # None of them is counted as done by the next sweep: each is attempted again.
        p = sweep("run", self.grid(modes), "--out", out)
        self.assertIn("1 already done, 8 failed", p.stdout, show(p))
        self.assertEqual((read_bytes(ok_record), os.stat(ok_record).st_mtime_ns), before)


    def test_d_writes_outside_the_run_directory_fail_the_run(self):
        out = os.path.join(self.tmp, "outside")
        stray = os.path.join(out, "stray.txt")
        p = sweep("run", self.grid(["outside"], "outside"), "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertFalse(os.path.exists(stray), "the program wrote outside its run directory")
        (rid,) = os.listdir(os.path.join(out, "runs"))
        state = read_text(os.path.join(out, "runs", rid, "state"))
        self.assertIn("state: failed", state)
        self.assertIn("PermissionError: [Errno 13] Permission denied", state)  # the program's own last line
        # Declared as a place it writes: allowed, and recorded.
        shutil.rmtree(out)
        os.makedirs(out)
        p = sweep("run", self.grid(["outside"], "outside", writes=[out]), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(os.path.exists(stray))
        with h5py.File(os.path.join(out, "runs", rid, "record.h5"), "r") as f:
            self.assertEqual(json.loads(text(f["environment"].attrs["program.writes"])), [out])
        p = sweep("reproduce", os.path.join(out, "runs", rid))  # the same places, as recorded
        self.assertEqual(p.returncode, 0, show(p))
        # confine: false: unconfined, and recorded as such.
        out2 = os.path.join(self.tmp, "unconfined")
        p = sweep("run", self.grid(["outside"], "unconfined", confine=False), "--out", out2)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(os.path.exists(os.path.join(out2, "stray.txt")))
        with h5py.File(os.path.join(out2, "runs", rid, "record.h5"), "r") as f:
            self.assertEqual(text(f["environment"].attrs["program.writes"]), "off")


    def test_e_reproduce_runs_a_program_as_its_grid_declared_never_as_its_record_says(self):
        # The program writes "program.writes: off" into its own record: reproduce still
        # confines it (and starts it where, and with the arguments, the grid declared).
        out = os.path.join(self.tmp, "claims")
        stray = os.path.join(out, "stray.txt")
        p = sweep("run", self.grid(["claims_unconfined"], "claims"), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertFalse(os.path.exists(stray), "the program wrote outside its run directory")
        (rid,) = os.listdir(os.path.join(out, "runs"))
        with h5py.File(os.path.join(out, "runs", rid, "record.h5"), "r") as f:
            self.assertEqual(text(f["environment"].attrs["program.writes"]), "off")  # its claim
        p = sweep("reproduce", os.path.join(out, "runs", rid))
        # The re-run's "two levels up" is the original run's directory.
        for path in (stray, os.path.join(out, "runs", rid, "stray.txt")):
            self.assertFalse(os.path.exists(path), "reproduce ran the program unconfined, as its record claimed\n" + show(p))
        self.assertIn("(run as its grid declared; the record says program.writes 'off', program.cwd '/', "
                      "program.pass_args 'true')", p.stdout, show(p))
        self.assertNotIn("unconfined", p.stdout, show(p))
        seen = read_json(os.path.join(out, "runs", rid, "reproduce", "1", "seen.json"))
        self.assertEqual(seen["cwd"], self.tmp)  # the grid's directory, not the record's "/"


    def test_f_a_file_added_to_or_removed_from_a_files_directory_makes_runs_stale(self):
        lib = os.path.join(self.tmp, "prog", "lib")
        os.makedirs(lib, exist_ok=True)
        with open(os.path.join(lib, "a.py"), "w") as f:
            f.write("A = 1\n")
        out = os.path.join(self.tmp, "tree")
        grid = self.grid(["ok"], "tree", files=[lib])
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        with h5py.File(os.path.join(out, "runs", rid, "record.h5"), "r") as f:
            self.assertEqual(json.loads(text(f["environment"].attrs["program.trees"])), [lib])
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(1 done, 0 to run)", p.stdout, show(p))
        # A module added beside the program's: its runs are stale, and the file is named.
        added = os.path.join(lib, "b.py")
        with open(added, "w") as f:
            f.write("B = 2\n")
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(0 done, 1 to run)", p.stdout, show(p))
        self.assertIn("stale %s: its program files changed since the run: %s (added since the run, in %s)"
                      % (rid, added, lib), p.stdout, show(p))
        p = sweep("run", grid, "--out", out)
        self.assertIn("1 completed", p.stdout, show(p))
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(1 done, 0 to run)", p.stdout, show(p))
        # And removed again: stale too.
        os.unlink(added)
        p = sweep("plan", grid, "--out", out)
        self.assertIn("(0 done, 1 to run)", p.stdout, show(p))
        self.assertIn("%s (removed since the run)" % added, p.stdout, show(p))


class RanksUnderMpiexec(unittest.TestCase):
    """b. Every rank of a program under mpiexec gets the same run and its own rank."""

    def test_two_ranks(self):
        tmp = tempfile.mkdtemp(prefix="program_ranks_test.")
        self.addCleanup(shutil.rmtree, tmp, True)
        grid = os.path.join(tmp, "ranks.yaml")
        g = {"name": "ranks",
             "program": {"argv": ["/usr/bin/python3", os.path.join(HERE, "rank_program.py")], "kind": "ranks"},
             "base": {"train": {"steps": 2}, "dist": {"world_size": 2}}, "seeds": 2}
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        out = os.path.join(tmp, "out")
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("2 completed", p.stdout, show(p))
        for rid in os.listdir(os.path.join(out, "runs")):
            d = os.path.join(out, "runs", rid)
            notes = [read_json(os.path.join(d, "seen-rank%d.json" % r)) for r in (0, 1)]
            self.assertEqual([n["rank"] for n in notes], [0, 1])
            for n in notes:
                self.assertEqual(n["size"], 2)
                self.assertEqual(n["env"]["SWEEP_RUN_ID"], rid)
                self.assertEqual(n["env"]["SWEEP_RUN_DIR"], d)
                self.assertEqual(n["argv"][1:5], ["--config", d + "/config.yaml", "--out", d])
            # Each rank's output in its own log, as for sweep-train.
            self.assertTrue(os.path.exists(os.path.join(d, "logs", "rank1.log")))
            with h5py.File(os.path.join(d, "record.h5"), "r") as f:
                self.assertEqual(int(f.attrs["world_size"]), 2)
        p = sweep("reproduce", d)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: 2 steps, 3 checksums", p.stdout, show(p))


class BadGrids(unittest.TestCase):
    """d. exit 2 before anything starts, naming the grid file and key; nothing written."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="program_bad_test.")
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, program, needle, extra=None):
        g = {"name": "bad", "program": program, "base": {"train": {"steps": 2}}}
        g.update(extra or {})
        path = os.path.join(self.tmp, "bad.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        for cmd in ("plan", "run"):
            p = sweep(cmd, path, "--out", self.out) if cmd == "run" else sweep(cmd, path)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
            self.assertIn(path + ":", p.stderr, show(p))
            self.assertIn(needle, p.stderr, show(p))
        self.assertFalse(os.path.lexists(self.out), "a bad grid created the sweep directory")

    def test_program_not_found(self):
        self.refused({"argv": ["no-such-program-xyz"], "kind": "k"}, "'program.argv[0]': 'no-such-program-xyz': not found")

    def test_program_not_executable(self):
        path = os.path.join(self.tmp, "plain.txt")
        open(path, "w").close()
        self.refused({"argv": ["./plain.txt"], "kind": "k"}, "not found or not executable")

    def test_script_missing(self):
        self.refused({"argv": ["python3", "gone/train.py"], "kind": "k"}, "'program.argv[1]': 'gone/train.py'")

    def test_undeclared_key(self):
        self.refused({"argv": ["python3"], "kind": "k", "keys": {"width": {"type": "int", "default": 1, "min": 1,
                                                                            "max": 9}}},
                     "did you mean 'model.width'", {"base": {"model": {"widht": 3}}})

    def test_out_of_range_value(self):
        self.refused({"argv": ["python3"], "kind": "k2", "keys": {"width": {"type": "int", "default": 1, "min": 1,
                                                                             "max": 9}}},
                     "model.width", {"grid": {"model.width": [3, 10]}})

    def test_bad_declaration(self):
        self.refused({"argv": ["python3"], "kind": "k3", "keys": {"width": {"type": "integer", "default": 1}}},
                     "'program.keys.width.type'")

    def test_program_and_launch_trainer(self):
        self.refused({"argv": ["python3"], "kind": "k4"}, "launch.trainer names a training program too",
                     {"launch": {"trainer": "/bin/true"}})


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
