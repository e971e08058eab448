#!/usr/bin/python3
"""Nothing a run starts outlives it: a program that forks, double-forks, setsid()s,
hops (tests/programs/hopper.c forks and exits in a loop), ignores SIGTERM and tries to
stop its parent, run by `sweep run` under the local launcher,
under mpiexec (two ranks) and under Slurm. Its helpers also try to forge the record once
the run is over. After every `sweep run` returns, after a Ctrl-C and after the driver is
SIGKILLed, no process of any run is left, the record no longer changes and the run lock
is free (the next `sweep run` starts at once).

Every process of the program carries SOAK_TAG=<a tag of this test> in its environment:
the test finds what is left by reading /proc/*/environ.

Usage: test_process_tree.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep. The Slurm
case runs when SLURM_CONF names the test cluster (ctest sets it), else it is skipped.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
from programs_util import program_grid, write_program  # noqa: E402

# model.mode: "finish" writes its record and exits 0; "hang" never finishes (for the
# Ctrl-C and SIGKILL cases). Before either, every rank starts:
#   a child that ignores SIGTERM and sleeps;
#   subprocess.Popen(["sleep", "300"]);
#   a double-forked setsid() daemon that ignores SIGTERM and, once the record is there,
#   rewrites it (the forgery) every 0.2 s;
# and rank 0 tries to stop its parent (SIGSTOP; refused where Landlock scopes signals,
# else the driver continues the box it stopped). The forger waits until the command has
# ended and 3 s more, longer than the run's grace period.
PROGRAM = r'''
import signal, subprocess, time
from programs_util import TinyRecord, program_run
out, text, pairs = program_run()
cfg = dict(pairs)
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("SLURM_PROCID") or 0)
record = os.path.join(out, "record.h5")

def keep_only_the_lock():
    """A helper keeps run.lock (as a forgotten child would) and nothing else: an HDF5
    handle it kept would hold the record file's own lock."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if int(fd) > 2 and not os.readlink("/proc/self/fd/" + fd).endswith("/run.lock"):
                os.close(int(fd))
        except OSError:
            pass

def stubborn_child():
    if os.fork() == 0:
        keep_only_the_lock()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)

main_pid = os.getpid()

def gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True

def forger():
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        keep_only_the_lock()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while not gone(main_pid):
            time.sleep(0.1)
        time.sleep(3)  # longer than the grace period the test gives (launch.grace_s: 2)
        while True:
            time.sleep(0.2)
            if os.path.exists(record):
                try:
                    with open(record, "r+b") as f:
                        f.seek(0, 2)
                        f.write(b"FORGED")
                except OSError:
                    pass

def hopper():
    """tests/programs/hopper.c: forks and exits in a loop, and once this process is gone
    (and 3 s more) rewrites the record and the run's state."""
    subprocess.Popen([os.environ["SWEEP_TEST_HOPPER"], str(main_pid), "3000", record, os.path.join(out, "state")])

def helpers():
    stubborn_child()
    subprocess.Popen(["sleep", "300"])
    forger()
    hopper()
    if rank == 0:
        try:
            os.kill(os.getppid(), signal.SIGSTOP)
        except OSError:
            pass
    with open(os.path.join(out, "started-rank%d" % rank), "w") as f:
        f.write(str(os.getpid()))
    if cfg["model.mode"] == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)

if rank != 0:
    helpers()
    sys.exit(0)
# The writer holds run.lock: the helpers started now inherit it.
with TinyRecord(out, text, pairs) as r:
    helpers()
    r.step(1, loss=1.0, lr=0.1)
    r.checksum(1)
    r.finish()
'''


def tagged(tag):
    """Pids of the living processes whose environment holds SOAK_TAG=<tag>."""
    needle = ("SOAK_TAG=%s" % tag).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def wait_until(what, limit_s):
    """Polls `what` until it is true or `limit_s` passed (a bound far from any machine's
    speed: the property is what happens, not how fast)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.1)
    return what()


class Soak(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="process_tree_test.")
        cls.script = write_program(os.path.join(cls.work, "soak.py"), PROGRAM)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.tag = uuid.uuid4().hex
        os.environ["SOAK_TAG"] = self.tag
        os.environ["SWEEP_TEST_HOPPER"] = os.path.join(cli_util.BIN_DIR, "test-hopper")
        self.addCleanup(self.kill_leftovers)

    def kill_leftovers(self):
        for pid in tagged(self.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def grid(self, mode, launch=None, world=1):
        return program_grid(os.path.join(self.work, "soak-%s.yaml" % uuid.uuid4().hex[:8]), "soak", self.script,
                            "soak", {"train": {"steps": 1, "threads": 1}, "dist": {"world_size": world},
                                     "model": {"mode": mode}},
                            modes=["finish", "hang"], default="finish", launch=dict({"grace_s": 2}, **(launch or {})))

    def out(self):
        d = tempfile.mkdtemp(prefix="out.", dir=self.work)
        return os.path.join(d, "out")

    def assert_nothing_left(self, out, p=None):
        left = tagged(self.tag)
        self.assertEqual(left, [], "processes of the run outlived it" + ("\n" + show(p) if p else ""))
        # The run lock is free: nothing holds it.
        for rid in os.listdir(os.path.join(out, "runs")):
            lock = os.path.join(out, "runs", rid, "run.lock")
            if os.path.exists(lock):
                q = subprocess.run(["flock", "-n", lock, "true"])
                self.assertEqual(q.returncode, 0, "run.lock of %s is still held" % rid)

    def finished_run(self, launch=None, world=1):
        out = self.out()
        p = sweep("run", self.grid("finish", launch, world), "--out", out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("1 completed", p.stdout, show(p))
        self.assert_nothing_left(out, p)
        (rid,) = os.listdir(os.path.join(out, "runs"))
        record = os.path.join(out, "runs", rid, "record.h5")
        state = os.path.join(out, "runs", rid, "state")
        before = digest(record), digest(state)
        time.sleep(4)  # a forger or hopper that lived on would write 3 s after the command ended
        self.assertEqual((digest(record), digest(state)), before, "the record or state changed after the run ended")
        for path in (record, state):
            with open(path, "rb") as f:
                self.assertFalse(f.read().endswith(b"FORGED"), "a helper of the run forged " + path)
        q = sweep("status", out)
        self.assertEqual(q.returncode, 0, show(q))
        self.assertNotIn("damaged", q.stdout, show(q))
        logs = ""
        for root, _, files in os.walk(os.path.join(out, "runs", rid, "logs")):
            for name in files:
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    logs += f.read()
        self.assertIn("outlived the run's command (", logs)
        return out, logs

    def test_a_local_run_ends_with_everything_it_started(self):
        self.finished_run()

    def test_b_two_ranks_under_mpiexec_end_with_everything(self):
        out, logs = self.finished_run(world=2)
        self.assertIn("sweep-rank: ", logs)  # each rank's supervisor ended its leftovers

    def test_c_slurm_ranks_end_with_everything(self):
        if not os.environ.get("SLURM_CONF") or not shutil.which("sbatch"):
            self.skipTest("no test Slurm cluster (SLURM_CONF unset)")
        self.finished_run(launch={"launcher": "slurm", "slurm": {"poll_s": 0.5}})

    def interrupted_run(self, how, world=1):
        out = self.out()
        grid = self.grid("hang", world=world)
        log = open(os.path.join(self.work, "driver-%s.log" % self.tag), "w")
        self.addCleanup(log.close)
        driver = subprocess.Popen([os.path.join(cli_util.BIN_DIR, "sweep"), "run", grid, "--out", out],
                                  stdout=log, stderr=subprocess.STDOUT, env=cli_util.program_env())
        self.addCleanup(lambda: driver.poll() is None and driver.kill())
        # Every rank has started its helpers (the forger: a setsid daemon).
        started = wait_until(lambda: os.path.isdir(os.path.join(out, "runs")) and any(
            all(os.path.exists(os.path.join(out, "runs", r, "started-rank%d" % k)) for k in range(world))
            for r in os.listdir(os.path.join(out, "runs"))), 120)
        self.assertTrue(started, "the program never started")
        self.assertTrue(wait_until(lambda: len(tagged(self.tag)) >= 4 * world, 30), tagged(self.tag))
        driver.send_signal(how)
        driver.wait(timeout=120)
        # The driver's direct children end their trees within the grace period (2 s);
        # after a SIGKILL of the driver nothing waits for them, so give them that time.
        self.assertTrue(wait_until(lambda: not tagged(self.tag), 60),
                        "left after %s: %s" % (signal.Signals(how).name, tagged(self.tag)))
        self.assert_nothing_left(out)
        return out, grid

    def test_d_ctrl_c_ends_every_process_of_the_run(self):
        self.interrupted_run(signal.SIGINT)

    def test_e_a_killed_driver_leaves_nothing_and_frees_the_lock(self):
        out, grid = self.interrupted_run(signal.SIGKILL)
        # The next driver is not kept waiting by a helper holding the lock: the run
        # starts at once (and is stopped here by a second driver SIGKILL).
        self.interrupted_run_again(out, grid)

    def interrupted_run_again(self, out, grid):
        log = open(os.path.join(self.work, "again-%s.log" % self.tag), "w+")
        self.addCleanup(log.close)
        driver = subprocess.Popen([os.path.join(cli_util.BIN_DIR, "sweep"), "run", grid, "--out", out],
                                  stdout=log, stderr=subprocess.STDOUT, env=cli_util.program_env())
        self.addCleanup(lambda: driver.poll() is None and driver.kill())
        self.assertTrue(wait_until(lambda: len(tagged(self.tag)) >= 4, 120), "the run did not start again")
        driver.kill()
        driver.wait(timeout=60)
        log.seek(0)
        self.assertNotIn("still being written by", log.read())
        self.assertTrue(wait_until(lambda: not tagged(self.tag), 60), tagged(self.tag))

    def test_f_mpiexec_ranks_end_after_a_killed_driver(self):
        self.interrupted_run(signal.SIGKILL, world=2)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
