#!/usr/bin/python3
"""examples/pytorch-ddp/train.py, an ordinary PyTorch DDP script on sweep.init(), driven by
the real `sweep` binary over a trimmed copy of sweeps/pytorch-ddp.yaml (20 steps).

a. Under the local launcher (mpiexec, 2 ranks; label mpi): each run has one record, of
   its run id, written by rank 0: no other record or partial anywhere in its directory,
   and rank 1's log (logs/rank1.log) shows it ran as rank 1 of 2 over the rendezvous
   sweep gave it and finished; the run is completed. A second `sweep run` into another
   directory gives bit-identical records (`sweep compare DIR1 DIR2`), and the one-rank
   run of the same global batch does not (plain DDP's bits are its layout's).
b. The same at 2 ranks under the Slurm launcher on the test cluster (--slurm; label
   slurm): the partition `nodes`, one rank on each test node (tests/slurm/start-cluster.sh),
   so the rendezvous is the job's first node; rank 1's log is under logs/<its node>/.
   The nodes share this machine's CPU, so the records are also those of the same grid
   under mpiexec here. Skipped (exit 77) only when no Slurm cluster answers `sinfo`
   under SLURM_CONF.

Usage: test_pytorch_ddp.py [BIN_DIR] [--slurm] [unittest options]
"""

import glob
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

try:
    import h5py
    import xxhash
    import yaml
    if importlib.util.find_spec("torch") is None:  # the example's
        raise ImportError("No module named 'torch'")
except ImportError as e:  # ctest counts exit 77 as skipped
    print("test_pytorch_ddp.py: skipped: %s (python3-torch, h5py, xxhash and yaml are needed)" % e)
    sys.exit(77)

import cli_util  # noqa: E402
from cli_util import read_bytes, run, show, sweep  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "pytorch-ddp")
STEPS = 20
SLURM = "--slurm" in sys.argv
NODES = ["sweep-node1", "sweep-node2"]  # the partition `nodes` of tests/slurm/start-cluster.sh


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def slurm_answers():
    """Why no Slurm cluster answers (SLURM_CONF unset, sinfo failing, the partition
    `nodes` not up), or "" when it does."""
    if not os.environ.get("SLURM_CONF"):
        return "SLURM_CONF is unset (ctest sets it to the test cluster's config)"
    if not shutil.which("sinfo") or not shutil.which("sbatch"):
        return "sinfo or sbatch is not installed"
    try:
        p = subprocess.run(["sinfo", "-h", "-N", "-p", "nodes", "-o", "%N %T"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 60 s (SLURM_CONF=%s)" % os.environ["SLURM_CONF"]
    up = [line.split()[0] for line in p.stdout.splitlines()
          if len(line.split()) == 2 and line.split()[1] in ("idle", "mixed", "allocated")]
    if p.returncode != 0 or sorted(up) != NODES:
        return ("the partition nodes is not up (sinfo under SLURM_CONF=%s: exit %d, %s); start it with "
                "tests/slurm/start-cluster.sh as root" % (os.environ["SLURM_CONF"], p.returncode,
                                                           (p.stdout + p.stderr).strip() or "nothing"))
    return ""


def trimmed_grid(path, launch, worlds):
    """sweeps/pytorch-ddp.yaml over the example in place (absolute paths), STEPS steps, one
    lr, dist.world_size over `worlds`, launched by `launch`."""
    with open(os.path.join(ROOT, "sweeps", "pytorch-ddp.yaml"), encoding="utf-8") as f:
        g = yaml.safe_load(f)
    p = g["program"]
    p["argv"] = ["/usr/bin/python3", os.path.join(EXAMPLE, "train.py")]
    p["cwd"] = EXAMPLE
    p["data"] = [os.path.join(ROOT, "examples", "pytorch-script", "data", "corpus.bin")]
    g["base"]["train"].update(steps=STEPS, eval_every=10, checksum_every=5)
    g["grid"] = {"dist.world_size": worlds}
    g["launch"] = launch
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(g, f, sort_keys=False)
    return path


class DdpUnderSweep:
    """What both launchers must show; the subclasses say how the runs start."""

    LAUNCH = None
    WORLDS = [2]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pytorch_ddp_test.")
        cls.grid = trimmed_grid(os.path.join(cls.tmp, "grid.yaml"), cls.LAUNCH, cls.WORLDS)
        cls.dirs = [os.path.join(cls.tmp, "first"), os.path.join(cls.tmp, "second")]
        cls.results = [sweep("run", cls.grid, "--out", d) for d in cls.dirs]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def runs(self, i=0):
        """{world size: run directory} of sweep directory i, after its `sweep run` passed."""
        p = self.results[i]
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("%d completed, 0 already done, 0 failed" % len(self.WORLDS), p.stdout, show(p))
        out = {}
        for rid in os.listdir(os.path.join(self.dirs[i], "runs")):
            d = os.path.join(self.dirs[i], "runs", rid)
            for line in read_bytes(os.path.join(d, "config.yaml")).decode().splitlines():
                if line.startswith("  world_size: "):
                    out[int(line.split()[1])] = d
        self.assertEqual(sorted(out), self.WORLDS)
        return out

    def rank_log(self, run_dir, rank):
        """The log of `rank` (logs/rank<r>.log, or logs/<host>/rank<r>.log across hosts)."""
        found = glob.glob(os.path.join(run_dir, "logs", "rank%d.log" % rank)) + \
            glob.glob(os.path.join(run_dir, "logs", "*", "rank%d.log" % rank))
        self.assertEqual(len(found), 1, "logs of rank %d: %s" % (rank, found))
        return found[0], read_bytes(found[0]).decode(errors="replace")

    def check_rank1_log(self, run_dir, log_path, log):
        """Rank 1's own line: the place and rendezvous sweep gave it."""
        self.assertIn("rank 1 of 2 (local rank 0" if self.ACROSS_HOSTS else "rank 1 of 2 (local rank 1", log)
        self.assertIn("rank 1 done", log)
        self.assertNotIn("Traceback", log)

    def test_a_one_record_per_run_written_by_rank_0(self):
        run_dir = self.runs()[2]
        rid = os.path.basename(run_dir)
        # The run id names the record, and it is the hash of the run's config.
        self.assertEqual(xxhash.xxh3_64_hexdigest(read_bytes(os.path.join(run_dir, "config.yaml"))), rid)
        records = sorted(os.path.relpath(p, run_dir) for p in glob.glob(os.path.join(run_dir, "**", "*.h5*"),
                                                                          recursive=True))
        self.assertEqual(records, ["record.h5"], "one record, no partial, no second writer's file")
        with h5py.File(os.path.join(run_dir, "record.h5"), "r") as f:
            self.assertEqual(text(f.attrs["run_id"]), rid)
            self.assertEqual(text(f.attrs["status"]), "completed")
            env = {k: text(v) for k, v in f["environment"].attrs.items()}
            self.assertEqual(env["world_size"], "2")
            self.assertEqual(int(f.attrs["world_size"]), 2)  # /ranks has a column per rank
            self.assertEqual(f["ranks/step_time_s"].shape, (STEPS, 2))
            self.assertEqual(text(f.attrs["sweep_id"]), "pytorch-ddp")
            self.assertEqual(len(f["metrics/step"]), STEPS)
            self.assertEqual(list(f["eval/step"][:]), [10, 20])
            self.assertIn("accuracy", f["metrics/extra"])
            self.assertIn("accuracy", f["eval/extra"])
            # sweep.ddp.RankGradNorms: each rank's share of the gradient, measured before DDP's
            # all-reduce; the shares add up to the gradient, so its norm is at most their sum,
            # and the ranks' rows differ, so the shares do.
            shares = f["ranks/grad_norm"][:]
            self.assertEqual(shares.shape, (STEPS, 2))
            norms = f["metrics/grad_norm"][:]
            for i in range(STEPS):
                self.assertTrue(all(math.isfinite(x) and x > 0 for x in shares[i]), shares[i])
                self.assertNotEqual(shares[i][0], shares[i][1])
                self.assertLessEqual(norms[i], (shares[i][0] + shares[i][1]) * (1 + 1e-5))
                self.assertGreaterEqual(norms[i], abs(shares[i][0] - shares[i][1]) * (1 - 1e-5))
            # run.gradients: each tensor's norm every 10 steps and at the last.
            self.assertEqual(list(f["telemetry/step"][:]), [10, 20])
        for line in read_bytes(os.path.join(run_dir, "state")).decode().splitlines():
            if line.startswith("state: "):
                self.assertEqual(line, "state: completed")
        # Rank 0 and rank 1 both ran, each with its own log; only rank 0 printed steps.
        _, log0 = self.rank_log(run_dir, 0)
        self.assertIn("rank 0 of 2", log0)
        self.assertIn("step %d loss" % STEPS, log0)
        path1, log1 = self.rank_log(run_dir, 1)
        self.check_rank1_log(run_dir, path1, log1)
        self.assertNotIn("step 1 loss", log1)
        q = sweep("status", self.dirs[0])
        self.assertEqual(q.returncode, 0, show(q))
        self.assertIn("%d runs: %d completed" % (len(self.WORLDS), len(self.WORLDS)), q.stdout, show(q))

    def test_b_a_second_sweep_gives_bit_identical_records(self):
        first, second = self.runs(0), self.runs(1)
        self.assertEqual({w: os.path.basename(d) for w, d in first.items()},
                         {w: os.path.basename(d) for w, d in second.items()})
        p = sweep("compare", self.dirs[0], self.dirs[1])
        self.assertEqual(p.returncode, 0, show(p))
        n = len(self.WORLDS)
        self.assertIn("%d pairs: %d identical, 0 within tolerance, 0 differ" % (n, n), p.stdout, show(p))
        for w, d in first.items():
            self.assertIn("%s  identical bit-for-bit: %d steps, %d checksums, 2 evaluations"
                          % (os.path.basename(d), STEPS, STEPS // 5 + 1), p.stdout, show(p))


@unittest.skipIf(SLURM, "the local launcher's cases run without --slurm")
class LocalLauncher(DdpUnderSweep, unittest.TestCase):
    """a. mpiexec on this machine; the one-rank run of the same global batch beside it."""

    LAUNCH = {"launcher": "local", "parallel": 1}
    WORLDS = [1, 2]
    ACROSS_HOSTS = False

    def check_rank1_log(self, run_dir, log_path, log):
        super().check_rank1_log(run_dir, log_path, log)
        self.assertEqual(log_path, os.path.join(run_dir, "logs", "rank1.log"))
        self.assertIn("rendezvous 127.0.0.1:", log)

    def test_d_reproduce_restarts_both_ranks_and_says_bit_for_bit(self):
        """`sweep reproduce` of the two-rank run starts two ranks behind sweep-rank with
        their RANK and WORLD_SIZE (it used to start them as two one-rank runs), from a
        path relative to where it is run (the program starts in its own cwd)."""
        run_dir = self.runs()[2]
        p = run([os.path.join(cli_util.BIN_DIR, "sweep"), "reproduce", os.path.relpath(run_dir, self.tmp)],
                cwd=self.tmp)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: %d steps" % STEPS, p.stdout, show(p))

    def test_c_plain_ddp_bits_are_the_layouts(self):
        """The same math on one rank (micro-batch 16) and two (8 each): other bits, as
        README.md says; sweeps/pytorch-invariance.yaml is the layout-free version."""
        runs = self.runs()
        p = sweep("compare", runs[1], runs[2])
        self.assertEqual(p.returncode, 1, show(p))
        self.assertNotIn("identical bit-for-bit", p.stdout, show(p))
        self.assertIn("config dist.world_size: 1 -> 2", p.stdout, show(p))


@unittest.skipUnless(SLURM, "the Slurm cases run with --slurm")
class SlurmLauncher(DdpUnderSweep, unittest.TestCase):
    """b. srun across the two test nodes, one rank on each."""

    LAUNCH = {"launcher": "slurm", "parallel": 1, "blas": "native",
              "slurm": {"partition": "nodes", "nodes": 2, "mpi": "pmix", "poll_s": 0.5}}
    ACROSS_HOSTS = True

    def check_rank1_log(self, run_dir, log_path, log):
        super().check_rank1_log(run_dir, log_path, log)
        # Rank 0 on the job's first node, rank 1 on the other, meeting at the first.
        self.assertEqual(log_path, os.path.join(run_dir, "logs", NODES[1], "rank1.log"))
        self.assertIn("rendezvous %s:" % NODES[0], log)

    def test_c_the_same_bits_as_under_mpiexec_here(self):
        """The nodes share this machine's CPU: the runs on two nodes are the runs of two
        local ranks (the same BLAS kernel, launch.blas native, as on Slurm)."""
        self.runs(0)
        local = os.path.join(self.tmp, "local")
        grid = trimmed_grid(os.path.join(self.tmp, "local.yaml"), {"launcher": "local", "blas": "native"},
                            self.WORLDS)
        p = sweep("run", grid, "--out", local)
        self.assertEqual(p.returncode, 0, show(p))
        p = sweep("compare", self.dirs[0], local)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("1 pairs: 1 identical, 0 within tolerance, 0 differ", p.stdout, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    if SLURM:
        sys.argv.remove("--slurm")
        why = slurm_answers()
        if why:
            print("test_pytorch_ddp.py --slurm: skipped: no Slurm cluster answers: %s" % why, flush=True)
            sys.exit(77)
    unittest.main()
