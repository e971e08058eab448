#!/usr/bin/python3
"""examples/pytorch-script/train.py (a PyTorch script under sweep's trainer contract) driven
by the real `sweep` binary: a 4-run grid of the example's settings, its records and report,
`sweep reproduce` of a run (bit for bit), a re-run by a copy of the script with its seeding
perturbed (exit 1, the first differing step named), and the script's bad-input exits.

Usage: test_pytorch_script.py [BIN_DIR] [unittest options]
BIN_DIR holds sweep (ctest passes ${CMAKE_BINARY_DIR}/bin); default $SWEEP_BIN_DIR or
<repo>/build/bin. The script and the records need /usr/bin/python3 with torch, numpy,
h5py, xxhash and PyYAML (this test reads the example grid with it).
"""

import json
import os
import re
import shutil
import stat
import sys
import tempfile
import unittest

import h5py
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "examples", "pytorch-script", "train.py")
EXAMPLE_GRID = os.path.join(ROOT, "sweeps", "pytorch-script.yaml")
try:
    import sweep_record as sr
except ImportError:  # run in place without PYTHONPATH
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import sweep_record as sr

sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, run, show, sweep  # noqa: E402

STEPS = 20  # the example's 60, cut for the test


class PytorchScript(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(os.path.join(cli_util.BIN_DIR, "sweep"), os.X_OK):
            raise AssertionError("sweep is not in %s (build it, or pass the bin dir)" % cli_util.BIN_DIR)
        cls.tmp = tempfile.mkdtemp(prefix="pytorch_script_test.")
        # The example's grid, cut to 4 runs (its learning rates x its seeds) of STEPS steps,
        # running a copy of the script (the c tests edit it in place, as a user would).
        cls.script = os.path.join(cls.tmp, "prog", "train.py")
        os.makedirs(os.path.dirname(cls.script))
        shutil.copy2(SCRIPT, cls.script)
        with open(EXAMPLE_GRID, encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g["name"] = "pytorch-script-test"
        cls.argv = ["/usr/bin/python3", cls.script]
        g["program"]["argv"] = cls.argv
        g["launch"] = {"parallel": 2}
        g["base"]["train"]["steps"] = STEPS
        g["grid"] = {"train.lr": g["grid"]["train.lr"]}
        cls.grid = os.path.join(cls.tmp, "grid.yaml")
        with open(cls.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        cls.dir = os.path.join(cls.tmp, "sweep")
        cls.run_result = sweep("run", cls.grid, "--out", cls.dir)
        runs = os.path.join(cls.dir, "runs")
        cls.ids = sorted(os.listdir(runs)) if os.path.isdir(runs) else []

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_dir(self, i=0):
        self.assertEqual(self.run_result.returncode, 0, show(self.run_result))
        return os.path.join(self.dir, "runs", self.ids[i])

    # --- a. the sweep, its records and its report

    def test_a1_describe_models(self):
        p = run([SCRIPT, "--describe-models"])
        self.assertEqual(p.returncode, 0, show(p))
        d = yaml.safe_load(p.stdout)
        self.assertEqual(d["offers"], ["torch-lm"])
        self.assertEqual([k["name"] for k in d["models"][0]["keys"]], ["width", "layers", "dropout"])

    def test_a2_sweep_run_records(self):
        p = self.run_result
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("4 completed", p.stdout + p.stderr, show(p))
        self.assertEqual(len(self.ids), 4, self.ids)
        lrs = set()
        for rid in self.ids:
            d = os.path.join(self.dir, "runs", rid)
            with open(os.path.join(d, "config.yaml"), encoding="utf-8") as f:
                config_text = f.read()
            self.assertTrue(os.path.isfile(os.path.join(d, "record.h5")), rid)
            with h5py.File(os.path.join(d, "record.h5"), "r") as r:
                attr = lambda k: r.attrs[k].decode() if isinstance(r.attrs[k], bytes) else r.attrs[k]
                self.assertEqual(attr("status"), "completed", rid)
                # The run id the script wrote is the directory's, sweep's id of the config.
                self.assertEqual(attr("run_id"), rid)
                self.assertEqual(sr.run_id_of(config_text), rid)
                self.assertEqual(r["config/yaml"][()].decode(), config_text)
                cfg = dict(zip((k.decode() for k in r["config/keys"][()]), (v.decode() for v in r["config/values"][()])))
                self.assertEqual(cfg["model.kind"], "torch-lm")
                self.assertEqual(cfg["data.path"], "")  # a quoted text value, unquoted
                self.assertEqual(cfg["train.steps"], str(STEPS))
                lrs.add(cfg["train.lr"])
                envr = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in r["environment"].attrs.items()}
                self.assertEqual(envr["trainer"], self.script)
                # The record names the program sweep ran, and the driver's numerics settings.
                self.assertEqual(envr["program"], json.dumps(self.argv))
                self.assertRegex(envr["program.digest"], r"^xxh3:[0-9a-f]{16}$")
                self.assertEqual(yaml.safe_load(envr["program.keys"])["offers"], ["torch-lm"])
                self.assertEqual(envr["env.PYTHONHASHSEED"], "0")
                self.assertEqual(envr["env.OMP_NUM_THREADS"], cfg["train.threads"])
                self.assertEqual(envr["device"], "cpu")
                self.assertEqual(envr["torch_threads"], cfg["train.threads"])
                self.assertEqual(list(r["metrics/step"][()]), list(range(1, STEPS + 1)))
                self.assertEqual(list(r["checksums/step"][()]), list(range(0, STEPS + 1)))
                self.assertTrue(all(r["metrics/tokens"][()] > 0))
            with open(os.path.join(d, "logs", "rank0.log"), encoding="utf-8", errors="replace") as f:
                self.assertRegex(f.read(), r"(?m)^step 1 loss \d")
        self.assertEqual(len(lrs), 2, lrs)

    def test_a3_report(self):
        self.run_dir()
        p = sweep("report", self.dir)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "report.html")))
        p = sweep("report", self.dir, "--format", "csv", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        rows = p.stdout.strip().splitlines()
        self.assertTrue(rows[0].startswith("run_id,status,"), rows[0])
        self.assertEqual(sorted(r.split(",")[0] for r in rows[1:]), self.ids)
        self.assertTrue(all(r.split(",")[1] == "completed" for r in rows[1:]), rows)

    # --- b. reproduce: the record names the program

    def test_b_reproduce(self):
        p = sweep("reproduce", self.run_dir(0))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: %d steps, %d checksums" % (STEPS, STEPS + 1), p.stdout, show(p))

    # --- c. a copy of the script with its seeding perturbed does not reproduce

    def perturbed(self, old, new):
        """Edits the program sweep ran in place (restored by the caller's cleanup)."""
        text = read_bytes(self.script).decode("utf-8")
        self.assertEqual(text.count(old), 1, "the script's seeding changed: %r not found once" % old)
        self.addCleanup(shutil.copy2, SCRIPT, self.script)
        with open(self.script, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new))

    def test_c1_model_seed_perturbed(self):
        # train.seed + 1 draws other initial parameters: the records part at step 0, and the
        # environment says the program's files changed.
        self.perturbed('torch.manual_seed(T["seed"])', 'torch.manual_seed(T["seed"] + 1)')
        p = sweep("reproduce", self.run_dir(1))
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("diverged at step 0: the initial parameters differ", p.stdout, show(p))
        self.assertRegex(p.stdout, r"(?m)^environment program\.digest: xxh3:\w+ -> xxh3:\w+", show(p))

    def test_c2_data_seed_perturbed(self):
        # Other sequences from the same initial parameters: the first step's loss differs.
        self.perturbed("PCG64([self.seed, 1, sample])", "PCG64([self.seed + 1, 1, sample])")
        p = sweep("reproduce", self.run_dir(2))
        self.assertEqual(p.returncode, 1, show(p))
        self.assertRegex(p.stdout, r"(?m)^diverged at step 1: loss \S+ vs \S+$", show(p))

    def test_c3_trainer_cannot_replace_the_program(self):
        p = sweep("reproduce", self.run_dir(1), "--trainer", SCRIPT)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("--trainer cannot replace it", p.stderr, show(p))

    # --- d. bad input: exit 2 writing nothing, exit 3 touching nothing

    def test_d1_world_size_2(self):
        with open(os.path.join(self.run_dir(0), "config.yaml"), encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(text.count("\n  world_size: 1\n"), 1)
        config = os.path.join(self.tmp, "world2.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(text.replace("\n  world_size: 1\n", "\n  world_size: 2\n"))
        out = os.path.join(self.tmp, "world2-out")
        p = run([self.script, "--config", config, "--out", out])
        self.assertEqual(p.returncode, 2, show(p))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
        self.assertIn("world_size", p.stderr)
        self.assertFalse(os.path.lexists(out), "a bad config created --out")
        os.mkdir(out)  # an existing, empty --out stays empty
        p = run([self.script, "--config", config, "--out", out])
        self.assertEqual(p.returncode, 2, show(p))
        self.assertEqual(os.listdir(out), [])

    def test_d2_existing_record(self):
        src = self.run_dir(3)
        out = os.path.join(self.tmp, "existing")
        os.mkdir(out)
        record = os.path.join(out, "record.h5")
        shutil.copy2(os.path.join(src, "record.h5"), record)
        before = read_bytes(record), os.stat(record).st_mtime_ns
        p = run([self.script, "--config", os.path.join(src, "config.yaml"), "--out", out])
        self.assertEqual(p.returncode, 3, show(p))
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
        self.assertEqual((read_bytes(record), os.stat(record).st_mtime_ns), before)
        self.assertEqual(sorted(os.listdir(out)), ["record.h5"])


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
