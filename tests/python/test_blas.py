#!/usr/bin/python3
"""The OpenBLAS kernel of a run (launch.blas), driven by the real `sweep` and sweep-train:

- `sweep plan` says so when OpenBLAS's own choice is weaker than the CPU (simulated with
  SWEEP_TEST_BLAS_NATIVE, the probe's stand-in for a CPU OpenBLAS misjudges), and names
  the kernel auto runs instead;
- a named kernel reaches the run and its record (blas.kernel, env.OPENBLAS_CORETYPE); two
  sweeps with the same kernel are bit-identical; other kernels give other bits, and
  `sweep compare` names the kernel among the environment differences;
- `sweep reproduce` of a record made with a kernel other than OpenBLAS's own pins that
  kernel: bit for bit;
- a user's OPENBLAS_CORETYPE is kept and recorded; an unknown kernel name is exit 2.

Usage: test_blas.py [BIN_DIR] [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
TIMEOUT = 300


def cpu_flags():
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


FLAGS = cpu_flags()
HAS_AVX2 = {"avx2", "fma"} <= FLAGS


class Blas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="blas_test.")
        cls.cache = os.path.join(cls.tmp, "cache")  # a fresh verdict cache for this test

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def sweep(self, *args, env=None):
        e = dict(os.environ)
        e.pop("OPENBLAS_CORETYPE", None)
        e["SWEEP_CACHE_DIR"] = self.cache
        e.update(env or {})
        p = subprocess.run([os.path.join(BIN_DIR, "sweep")] + list(args), capture_output=True, text=True,
                           timeout=TIMEOUT, env=e)
        return p

    def grid(self, name, blas=None, world=1):
        g = {"name": name,
             "base": {"model": {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16},
                      "train": {"steps": 6, "micro_batch": 4, "accum": 2 // world, "lr": 3.0e-3},
                      "dist": {"world_size": world}}}
        if blas:
            g["launch"] = {"blas": blas}
        path = os.path.join(self.tmp, name + ".yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        return path

    def run_one(self, name, blas=None, env=None, world=1):
        out = os.path.join(self.tmp, name)
        p = self.sweep("run", self.grid(name, blas, world), "--out", out, env=env)
        self.assertEqual(p.returncode, 0, show(p))
        (rid,) = os.listdir(os.path.join(out, "runs"))
        return os.path.join(out, "runs", rid), p

    def environment(self, run_dir):
        with h5py.File(os.path.join(run_dir, "record.h5"), "r") as f:
            return {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["environment"].attrs.items()}

    @unittest.skipUnless(HAS_AVX2, "needs a CPU with AVX2: a kernel stronger than the simulated Prescott")
    def test_a_plan_says_when_openblas_chose_a_weak_kernel(self):
        p = self.sweep("plan", self.grid("weak"), env={"SWEEP_TEST_BLAS_NATIVE": "Prescott"})
        self.assertEqual(p.returncode, 0, show(p))
        self.assertRegex(p.stdout, r"(?m)^BLAS kernel (\w+) \(\d+ GFLOP/s\), not OpenBLAS's own choice Prescott "
                                   r"\(\d+ GFLOP/s\) \(weaker than the \w+ this CPU runs\): the fastest kernel", show(p))
        # A healthy choice says nothing.
        p = self.sweep("plan", self.grid("healthy"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertNotIn("BLAS kernel", p.stdout, show(p))

    @unittest.skipUnless(HAS_AVX2, "needs a CPU with AVX2 (Haswell)")
    def test_b_kernels_reach_the_runs_and_change_the_bits(self):
        haswell, p = self.run_one("haswell", "Haswell")
        self.assertIn("BLAS kernel Haswell", p.stdout, show(p))
        again, _ = self.run_one("haswell-again", "haswell")  # OpenBLAS's case-insensitive spelling
        prescott, _ = self.run_one("prescott", "Prescott")
        for d, k in ((haswell, "Haswell"), (again, "Haswell"), (prescott, "Prescott")):
            e = self.environment(d)
            self.assertEqual(e["blas.kernel"], k)
            self.assertEqual(e["env.OPENBLAS_CORETYPE"], k)
        p = self.sweep("compare", haswell, again)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("identical bit-for-bit", p.stdout, show(p))
        p = self.sweep("compare", prescott, haswell)
        self.assertEqual(p.returncode, 1, show(p))
        self.assertIn("environment blas.kernel: Prescott -> Haswell", p.stdout, show(p))
        self.assertIn("environment env.OPENBLAS_CORETYPE: Prescott -> Haswell", p.stdout, show(p))

    @unittest.skipUnless(HAS_AVX2, "needs a CPU with AVX2 (Haswell)")
    def test_c_reproduce_pins_the_recorded_kernel(self):
        # Sandybridge (AVX, no FMA) computes sgemm with other instructions than the AVX2
        # and AVX-512 kernels, so its bits differ from OpenBLAS's own choice on any CPU
        # with AVX2 (Zen's and Haswell's kernels, by contrast, give the same bits).
        native, _ = self.run_one("native", "native")
        pinned, _ = self.run_one("pinned", "Sandybridge")
        if self.environment(native)["blas.kernel"] == "Sandybridge":
            self.skipTest("OpenBLAS's own choice here is Sandybridge: nothing to pin")
        # The kernel matters here: OpenBLAS's own kernel gives other bits...
        p = self.sweep("compare", native, pinned)
        self.assertEqual(p.returncode, 1, show(p))
        # ...and reproduce, with OpenBLAS left to choose, still runs the recorded Sandybridge.
        p = self.sweep("reproduce", pinned)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit", p.stdout, show(p))
        self.assertIn("environment: identical", p.stdout, show(p))

    @unittest.skipUnless(HAS_AVX2, "needs a CPU with AVX2 (Haswell)")
    def test_d_the_users_coretype_is_kept(self):
        d, p = self.run_one("user", env={"OPENBLAS_CORETYPE": "Haswell"})
        self.assertIn("OPENBLAS_CORETYPE=Haswell is set in the environment: kept", p.stdout, show(p))
        self.assertEqual(self.environment(d)["blas.kernel"], "Haswell")

    @unittest.skipUnless(HAS_AVX2, "needs a CPU with AVX2 (Haswell)")
    def test_f_every_rank_under_mpiexec_runs_the_kernel(self):
        # Two ranks on Haswell give the bits of one rank on Haswell (the canonical reduction
        # is layout-free): a rank on another kernel would part them.
        one, _ = self.run_one("w1", "Haswell")
        two, _ = self.run_one("w2", "Haswell", world=2)
        self.assertEqual(self.environment(two)["blas.kernel"], "Haswell")
        p = self.sweep("compare", one, two)
        self.assertIn("identical bit-for-bit", p.stdout, show(p))

    def test_e_unknown_kernel(self):
        path = self.grid("unknown", "Skylake")
        out = os.path.join(self.tmp, "unknown-out")
        for args in (("plan", path), ("run", path, "--out", out)):
            p = self.sweep(*args)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, show(p))
            self.assertIn(path + ":", p.stderr)
            self.assertIn("key 'launch.blas': ", p.stderr)
            self.assertIn("unknown BLAS kernel 'Skylake' (did you mean 'SkylakeX'?)", p.stderr)
            self.assertIn("expected native, auto or one of Prescott", p.stderr)
        self.assertFalse(os.path.lexists(out))


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
