#!/usr/bin/python3
"""sweep's Python package installed as a user would, offline, with the system's pip into a
virtual environment that sees Debian's numpy, h5py, xxhash and torch
(`pip install --no-index --no-build-isolation --no-deps ./python`): then the example script
and the GPT-style script run outside sweep with nothing else (no PYTHONPATH, no SWEEP_*),
and write a record where the example's --out says; without the package they fail with
ModuleNotFoundError, so it is the install that makes them run.

Usage: test_pip_install.py [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def clean_env():
    """The environment of a user's shell: no PYTHONPATH, nothing of sweep's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SWEEP_")}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = "1"
    return env


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=600)


class PipInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pip_install_test.")
        # pip builds in the source tree (build/, *.egg-info): install from a copy.
        src = os.path.join(cls.tmp, "python")
        shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                                         "*.egg-info"))
        venv = os.path.join(cls.tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
        cls.python = os.path.join(venv, "bin", "python")
        cls.pip = run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--no-deps",
                       src], cwd=cls.tmp)
        cls.example = os.path.join(cls.tmp, "example")
        shutil.copytree(os.path.join(ROOT, "examples", "pytorch-script"), cls.example,
                        ignore=shutil.ignore_patterns("__pycache__"))
        cls.gpt = os.path.join(cls.tmp, "gpt")
        shutil.copytree(os.path.join(ROOT, "tests", "programs", "gpt"), cls.gpt,
                        ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["/usr/bin/python3", "prepare.py"], cwd=cls.gpt, check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_pip_installs_it(self):
        self.assertEqual(self.pip.returncode, 0, self.pip.stdout + self.pip.stderr)
        p = run([self.python, "-c", "import sweep, sweep_record; print(sweep.__file__)"], cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(os.path.join(self.tmp, "venv")), p.stdout)

    def test_example_script_runs_outside_sweep(self):
        out = os.path.join(self.tmp, "example-out")
        argv = ["train.py", "--steps", "4", "--eval-every", "2", "--out", out]
        p = run([self.python] + argv, cwd=self.example)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            self.assertEqual(f.attrs["status"], "completed")
            self.assertEqual(len(f["metrics/loss"]), 4)
        # Without the package the same script cannot start: the install is what it needs.
        p = run(["/usr/bin/python3"] + argv, cwd=self.example)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ModuleNotFoundError", p.stderr)

    def test_gpt_script_runs_outside_sweep(self):
        p = run([self.python, "train.py", "config/tiny.py", "--max_iters=3"], cwd=self.gpt)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("iter 3:", p.stdout)
        self.assertIn("tokens per iteration will be: 512", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
