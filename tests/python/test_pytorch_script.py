#!/usr/bin/python3
"""examples/pytorch-script/train.py, an argparse PyTorch script that adopted sweep's Python
API (python/sweep: sweep.init), driven by the real `sweep` binary.

a. the adoption: the script differs from the plain one it came from
   (tests/programs/pytorch_before/train.py) in at most 12 new or changed lines of code;
b. a sweep of it: each record holds the held-out loss, the custom metric (accuracy, per
   step and per evaluation), the program's source files and data file with their hashes,
   and every reader shows them (report, export, compare);
c. `sweep reproduce` says bit-for-bit; editing its model.py (a source file not on its
   command line) or its data file makes its runs stale, named by plan and reproduce;
d. outside sweep the script runs as before: a record only where --out says; pinned to one
   core beside a busy loop, its record says it waited for the core (rank_runqueue_share);
e. `sweep status` shows a run's step while it runs (the run held with SIGSTOP, no sleep);
f. a halving search over it (sweeps/pytorch-script-halving.yaml) replays in a second
   directory, and its winner is the run trained straight through; an asha search over
   it decides the same at one and three runs at a time;
g. bad input: a program that says it stops at rungs but trains on, evaluations out of
   order, a metric that is not a number, a write outside the run directory, a swept
   built-in key the program does not honour.

Usage: test_pytorch_script.py [BIN_DIR] [unittest options]
"""

import difflib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import xxhash
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch-script")
BEFORE = os.path.join(ROOT, "tests", "programs", "pytorch_before", "train.py")
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import read_bytes, run, show, sweep  # noqa: E402

STEPS = 20


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def env_of(path):
    with h5py.File(path, "r") as f:
        return {k: text(v) for k, v in f["environment"].attrs.items()}


def code_lines(path):
    """The lines of a script after its module docstring."""
    lines = read_bytes(path).decode().splitlines()
    quotes = [i for i, ln in enumerate(lines) if '"""' in ln]
    return lines[quotes[1] + 1:] if lines[1].startswith('"""') else lines


class PytorchScript(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pytorch_script_test.")
        cls.prog = os.path.join(cls.tmp, "prog")  # a copy of the example: the tests edit it
        shutil.copytree(EXAMPLE, cls.prog, ignore=shutil.ignore_patterns("__pycache__"))
        cls.grid = cls.example_grid("pytorch-script.yaml", "grid.yaml", steps=STEPS,
                                    grid={"train.lr": [1.0e-2, 3.0e-2]})
        cls.dir = os.path.join(cls.tmp, "sweep")
        cls.run_result = sweep("run", cls.grid, "--out", cls.dir)
        runs = os.path.join(cls.dir, "runs")
        cls.ids = sorted(os.listdir(runs)) if os.path.isdir(runs) else []

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def example_grid(cls, name, out_name, steps=None, grid=None, **program):
        """A shipped grid over the copy of the example (absolute paths), trimmed."""
        with open(os.path.join(ROOT, "sweeps", name), encoding="utf-8") as f:
            g = yaml.safe_load(f)
        p = g["program"]
        p["argv"] = ["/usr/bin/python3", os.path.join(cls.prog, "train.py")]
        p["cwd"], p["files"] = cls.prog, [os.path.join(cls.prog, "model.py")]
        p["data"] = [os.path.join(cls.prog, "data", "corpus.bin")]
        p.update(program)
        g.pop("seeds", None)
        if steps:
            g["base"]["train"]["steps"] = steps
        if grid:
            g["grid"] = grid
        path = os.path.join(cls.tmp, out_name)
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        return path

    def run_dir(self, i=0):
        self.assertEqual(self.run_result.returncode, 0, show(self.run_result))
        return os.path.join(self.dir, "runs", self.ids[i])

    def edited(self, path, data):
        """Replaces a file of the example's copy until the test ends."""
        saved = read_bytes(path)
        self.addCleanup(lambda: open(path, "wb").write(saved))
        with open(path, "wb") as f:
            f.write(data)

    # --- a. the adoption

    def test_a_the_script_adopted_sweep_in_at_most_12_lines(self):
        before, after = code_lines(BEFORE), code_lines(os.path.join(EXAMPLE, "train.py"))
        # The lines of the script that are new or changed (a replaced line counts once).
        changed = [ln for ln in difflib.unified_diff(before, after, lineterm="", n=0)
                   if ln[:1] == "+" and not ln.startswith("+++")]
        self.assertLessEqual(len(changed), 12, "\n".join(changed))
        self.assertTrue(any("sweep.init(" in ln for ln in changed), changed)

    # --- b. the records and every reader

    def test_b1_records_hold_eval_custom_metric_sources_and_data(self):
        self.assertIn("2 completed", self.run_result.stdout, show(self.run_result))
        data = os.path.join(self.prog, "data", "corpus.bin")
        data_hash = "xxh3:%016x" % xxhash.xxh3_64_intdigest(read_bytes(data))
        model_hash = "xxh3:%016x" % xxhash.xxh3_64_intdigest(read_bytes(os.path.join(self.prog, "model.py")))
        for i, rid in enumerate(self.ids):
            rec = os.path.join(self.run_dir(i), "record.h5")
            with h5py.File(rec, "r") as f:
                self.assertEqual(text(f.attrs["status"]), "completed")
                self.assertEqual(text(f.attrs["run_id"]), rid)
                self.assertEqual(int(f.attrs["schema_version"]), 5)  # gradient telemetry
                self.assertEqual(list(f["metrics/step"][:]), list(range(1, STEPS + 1)))
                self.assertEqual(list(f["eval/step"][:]), [10, 20])
                self.assertEqual(len(f["metrics/extra/accuracy"][:]), STEPS)
                self.assertTrue(all(0 <= a <= 1 for a in f["eval/extra/accuracy"][:]))
                self.assertEqual(list(f["checksums/step"][:]), [0, 10, 20])
                # run.gradients(): each tensor's norm every 10 steps and at the last, before
                # clipping: together the norm clip_grad_norm_ returned (as the script logged it).
                self.assertEqual(list(f["telemetry/step"][:]), [10, 20])
                self.assertEqual([text(w) for w in f["telemetry/why"][:]], ["every", "every,last"])
                norms = f["telemetry/tensor_grad_norm"][:]
                self.assertEqual(norms.shape, (2, len(f["params/name"][:])))
                for step, row in zip((10, 20), norms):
                    logged = float(f["metrics/grad_norm"][step - 1])
                    self.assertAlmostEqual(math.sqrt(sum(x * x for x in row)) / logged, 1.0, delta=1e-5)
            e = env_of(rec)
            self.assertEqual(e["data.hash"], data_hash)
            self.assertEqual(e["program.data"], '["%s %s"]' % (data_hash, data))
            self.assertIn("%s %s" % (model_hash, os.path.join(self.prog, "model.py")), e["program.files"])
            self.assertEqual(e["program.cwd"], self.prog)
            self.assertEqual(e["program.pass_args"], "false")

    def test_b2_every_reader_shows_them(self):
        self.run_dir()
        p = sweep("report", self.dir, "--format", "md", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        for name in ("eval_loss", "accuracy", "eval_accuracy"):
            self.assertIn("### %s\n" % name.replace("_", "\\_"), p.stdout, name)
        p = sweep("report", self.dir, "-o", os.path.join(self.tmp, "r.html"))
        self.assertEqual(p.returncode, 0, show(p))
        with open(os.path.join(self.tmp, "r.html"), encoding="utf-8") as f:
            html = f.read()
        self.assertEqual(html.count("<h3>eval_accuracy</h3>"), 1)
        p = sweep("export", self.dir, "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertEqual(len(re.findall(r",\d+,accuracy,", p.stdout)), STEPS * 2)
        self.assertEqual(len(re.findall(r",\d+,eval_accuracy,", p.stdout)), 2 * 2)
        p = sweep("compare", self.run_dir(0), self.run_dir(0))
        self.assertIn("identical bit-for-bit: %d steps, 3 checksums, 2 evaluations" % STEPS, p.stdout, show(p))
        p = sweep("show", self.run_dir(0))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertRegex(p.stdout, r"telemetry: +rows: 2 \(2 every, 1 last\); largest tensor gradient norms at step 20: ")

    # --- c. reproduce, and what makes a run stale

    def test_c1_reproduce(self):
        p = sweep("reproduce", self.run_dir(0))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("reproduced bit-for-bit: %d steps, 3 checksums" % STEPS, p.stdout, show(p))
        self.assertIn("environment: identical", p.stdout, show(p))

    def test_c2_a_changed_source_file_or_data_file_makes_runs_stale(self):
        model = os.path.join(self.prog, "model.py")
        self.edited(model, read_bytes(model) + b"# an edit\n")
        p = sweep("plan", self.grid, "--out", self.dir)
        self.assertIn("(0 done, 2 to run)", p.stdout, show(p))
        self.assertRegex(p.stdout, r"stale %s: its program file %s \(was xxh3:\w+, now xxh3:\w+\) changed since "
                         r"the run" % (self.ids[0], re.escape(model)), show(p))
        p = sweep("reproduce", self.run_dir(0))
        self.assertRegex(p.stdout, r"(?m)^changed since the run: its program file %s" % re.escape(model), show(p))
        data = os.path.join(self.prog, "data", "corpus.bin")
        self.doCleanups()
        raw = bytearray(read_bytes(data))
        raw[100] ^= 1
        self.edited(data, bytes(raw))
        p = sweep("plan", self.grid, "--out", self.dir)
        self.assertIn("(0 done, 2 to run)", p.stdout, show(p))
        self.assertRegex(p.stdout, r"stale %s: its data file %s \(was xxh3:\w+, now xxh3:\w+\) changed since the run"
                         % (self.ids[0], re.escape(data)), show(p))

    # --- d. outside sweep

    def test_d_outside_sweep_it_runs_as_before(self):
        script = os.path.join(self.prog, "train.py")
        work = os.path.join(self.tmp, "plain")
        os.makedirs(work)
        env = {k: v for k, v in cli_util.program_env().items() if not k.startswith("SWEEP_")}
        p = subprocess.run(["/usr/bin/python3", script, "--steps", "3", "--data", os.path.join(self.prog, "data",
                            "corpus.bin")], cwd=work, capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("step 3 loss", p.stdout)
        self.assertEqual(os.listdir(work), [])  # nothing written without --out
        out = os.path.join(work, "out")
        p = subprocess.run(["/usr/bin/python3", script, "--steps", "3", "--out", out, "--data",
                            os.path.join(self.prog, "data", "corpus.bin")],
                           cwd=work, capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(os.path.isfile(os.path.join(out, "record.h5")), os.listdir(out))
        self.assertTrue(os.path.isfile(os.path.join(out, "model.pt")))
        q = sweep("compare", out, out)
        self.assertIn("identical bit-for-bit: 3 steps", q.stdout, show(q))
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            share = {k: text(v) for k, v in f["summary"].attrs.items()}.get("rank_runqueue_share")
        if os.path.exists("/proc/thread-self/schedstat"):
            self.assertTrue(share is not None and 0 <= float(share) <= 1, share)

    def test_d2_a_script_sharing_its_core_records_it(self):
        """sweep.init() measures the run-queue wait of the thread that logs: pinned to one
        core beside a busy loop, the script waited for it about half its time (readers mark
        throughput measured so as measured on shared cores)."""
        if not os.path.exists("/proc/thread-self/schedstat"):
            self.skipTest("this kernel keeps no schedstat")
        out = os.path.join(self.tmp, "shared")
        env = {k: v for k, v in cli_util.program_env().items() if not k.startswith("SWEEP_")}
        busy = subprocess.Popen(["taskset", "-c", "0", "/bin/sh", "-c", "while :; do :; done"])
        try:
            p = subprocess.run(["taskset", "-c", "0", "/usr/bin/python3", os.path.join(self.prog, "train.py"),
                                "--steps", "10", "--out", out, "--data", os.path.join(self.prog, "data", "corpus.bin")],
                               cwd=self.tmp, capture_output=True, text=True, env=env, timeout=300)
        finally:
            busy.kill()
            busy.wait()
        self.assertEqual(p.returncode, 0, show(p))
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            share = float(text(f["summary"].attrs["rank_runqueue_share"]))
        self.assertGreaterEqual(share, 0.1)

    # --- e. live progress

    def test_e_status_shows_a_running_runs_step(self):
        grid = self.example_grid("pytorch-script.yaml", "live.yaml", steps=400, grid={"train.lr": [1.0e-2]})
        out = os.path.join(self.tmp, "live")
        driver = subprocess.Popen([os.path.join(cli_util.BIN_DIR, "sweep"), "run", grid, "--out", out, "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=cli_util.program_env())
        held = None
        try:
            deadline = time.monotonic() + 240
            while held is None and time.monotonic() < deadline and driver.poll() is None:
                for rid in os.listdir(os.path.join(out, "runs")) if os.path.isdir(os.path.join(out, "runs")) else []:
                    log = os.path.join(out, "runs", rid, "logs", "rank0.log")
                    if os.path.exists(log) and "step 3 loss" in read_bytes(log).decode(errors="replace"):
                        held = self.hold_program(os.path.join(out, "runs", rid))
                time.sleep(0.05)
            self.assertIsNotNone(held, "the run never reached step 3")
            p = sweep("status", out)
            self.assertRegex(p.stdout, r"running .*step (\d+)/400, loss", show(p))
            self.assertGreaterEqual(int(re.search(r"step (\d+)/400", p.stdout).group(1)), 1)
        finally:
            if held:
                os.kill(held, signal.SIGCONT)
            said, _ = driver.communicate(timeout=300)
        self.assertEqual(driver.returncode, 0, said)

    def hold_program(self, run_dir):
        """SIGSTOPs the python process of the run in `run_dir`; its pid."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                environ = read_bytes("/proc/%s/environ" % pid).split(b"\0")
                cmdline = read_bytes("/proc/%s/cmdline" % pid)
            except OSError:
                continue
            if b"SWEEP_RUN_DIR=" + run_dir.encode() in environ and b"train.py" in cmdline:
                os.kill(int(pid), signal.SIGSTOP)
                return int(pid)
        return None

    # --- f. halving

    def test_f_a_halving_search_over_it_replays(self):
        grid = self.example_grid("pytorch-script-halving.yaml", "halving.yaml")
        logs, dirs = [], []
        for k in range(2):
            out = os.path.join(self.tmp, "halving%d" % k)
            p = sweep("run", grid, "--out", out, "--quiet")
            self.assertEqual(p.returncode, 0, show(p))
            with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
                logs.append(f.read())
            dirs.append(out)
        self.assertEqual(logs[0], logs[1])
        self.assertIn("best of bracket", logs[0])
        p = sweep("compare", dirs[0], dirs[1])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("9 pairs: 9 identical", p.stdout, show(p))
        # The winner, promoted twice and resumed from its checkpoints, is the run trained
        # straight through.
        best = re.search(r"rank 1 trial (\d+) \S+ best of bracket", logs[0]).group(1)
        rid = re.search(r"(?m)^trial %s: .* -> (\w+)$" % best, logs[0]).group(1)
        winner = yaml.safe_load(open(os.path.join(dirs[0], "runs", rid, "config.yaml"), encoding="utf-8"))
        straight = self.example_grid("pytorch-script-halving.yaml", "straight.yaml",
                                     grid={"train.lr": [winner["train"]["lr"]], "model.width": [winner["model"]["width"]]})
        with open(straight, encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g.pop("search")
        with open(straight, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        out = os.path.join(self.tmp, "straight")
        p = sweep("run", straight, "--out", out, "--quiet")
        self.assertEqual(p.returncode, 0, show(p))
        p = sweep("compare", os.path.join(out, "runs", rid), os.path.join(dirs[0], "runs", rid))
        self.assertIn("identical bit-for-bit: 36 steps", p.stdout, show(p))

    def test_f2_an_asha_search_over_it_decides_the_same_at_parallel_1_and_3(self):
        # The same script under asynchronous halving: the stop/resume protocol it already
        # speaks is all asha needs, and one or three runs at a time decide the same.
        grid = self.example_grid("pytorch-script-halving.yaml", "asha.yaml")
        with open(grid, encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g["search"]["kind"] = "asha"
        g["launch"] = {"parallel": 3, "slots": 3}
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        logs, dirs = [], []
        for parallel in ("1", "3"):
            out = os.path.join(self.tmp, "asha" + parallel)
            p = sweep("run", grid, "--out", out, "--quiet", "--parallel", parallel)
            self.assertEqual(p.returncode, 0, show(p))
            with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
                logs.append(f.read())
            dirs.append(out)
        self.assertEqual(logs[0], logs[1])
        self.assertIn("search asha ", logs[0])
        self.assertIn("rung 1 steps 12: promoted trial ", logs[0])
        self.assertTrue(logs[0].endswith("\ndone\n"), logs[0])
        p = sweep("compare", dirs[0], dirs[1])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("9 pairs: 9 identical", p.stdout, show(p))

    # --- g. bad input

    def test_g1_a_program_that_says_it_stops_but_trains_on_fails_the_run(self):
        script = os.path.join(self.prog, "train.py")
        source = read_bytes(script)
        self.edited(script, source.replace(b"    if run.should_stop(step):", b"    if False:"))
        grid = self.example_grid("pytorch-script-halving.yaml", "ignores.yaml",
                                 grid={"train.lr": [1.0e-2, 3.0e-2, 1.0e-1]}, steps=12)
        out = os.path.join(self.tmp, "ignores")
        p = sweep("run", grid, "--out", out)
        self.assertEqual(p.returncode, 1, show(p))
        # It ends as stopped (run.finish() sees should_stop) but at step 12, not at its rung.
        self.assertRegex(p.stdout, r"FAILED .*: config \(the record says stopped after step 12, but the search asked "
                         r"for step 4 \(the stop_at file\); moved aside to ", show(p))
        self.assertIn("the search stops before ranking", p.stderr, show(p))

    PROGRAM = r'''
import os, sys
import numpy as np
import sweep
mode = sys.argv[1]
run = sweep.init({"mode": "ok"})
run.watch([("w", np.zeros(3, dtype=np.float32))])
run.log(1, 1.0, tokens=4)
if mode == "eval_order":
    run.eval(1, 0.5, 4)
    run.eval(0, 0.5, 4)
if mode == "metric_type":
    run.log(2, 0.9, accuracy="high")
if mode == "write_outside":
    open("escaped.txt", "w").write("x")
run.finish()
'''

    def test_g2_bad_rows_and_writes_fail_the_run_with_one_line_and_touch_nothing_completed(self):
        script = os.path.join(self.tmp, "tiny.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(self.PROGRAM)
        out = os.path.join(self.tmp, "bad-rows")
        done = None
        for mode, cause in (("ok", None),
                            ("eval_order", "ValueError: append_eval: an evaluation at step 0 after one at step 1; "
                                           "evaluations are recorded in step order"),
                            ("metric_type", "TypeError: metric 'accuracy': str 'high' is not a number"),
                            ("write_outside", "Permission denied: 'escaped.txt' (a program may write only its run "
                                              "directory ($SWEEP_RUN_DIR), its TMPDIR and what program.writes grants; "
                                              "to let it write escaped.txt, add that directory to program.writes")):
            g = {"name": "bad-" + mode.replace("_", "-"),
                 "program": {"argv": ["/usr/bin/python3", script, mode], "kind": "tiny", "pass_args": False,
                             "cwd": self.tmp},
                 "base": {"train": {"steps": 2}}}
            path = os.path.join(self.tmp, "bad-%s.yaml" % mode)
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(g, f, sort_keys=False)
            p = sweep("run", path, "--out", os.path.join(out, mode))
            if cause is None:
                self.assertEqual(p.returncode, 0, show(p))
                done = os.path.join(out, mode)
                before = {n: read_bytes(os.path.join(r, n)) for r, _, ns in os.walk(done) for n in ns
                          if n == "record.h5"}
                continue
            self.assertEqual(p.returncode, 1, show(p))
            failed = [ln for ln in p.stdout.splitlines() if ln.startswith("FAILED")]
            self.assertEqual(len(failed), 1, show(p))
            self.assertIn(cause, failed[0], show(p))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "escaped.txt")))
        after = {n: read_bytes(os.path.join(r, n)) for r, _, ns in os.walk(done) for n in ns if n == "record.h5"}
        self.assertEqual(before, after)

    def test_g3_a_swept_key_the_program_does_not_honour_is_warned_and_splits_no_runs(self):
        grid = self.example_grid("pytorch-script.yaml", "unhonoured.yaml",
                                 grid={"train.lr": [1.0e-2], "train.precision": ["fp32", "bf16"]})
        p = sweep("plan", grid, "--out", os.path.join(self.tmp, "unhonoured"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertRegex(p.stderr, r"unhonoured\.yaml:\d+:\d+: warning: key 'train\.precision' is not one the "
                         r"program honours \(program\.honours\); it is ignored and does not change run ids", show(p))
        self.assertIn("1 runs in", p.stdout, show(p))
        p = sweep("plan", grid.replace("unhonoured", "unhonoured"), "--out", self.dir)
        # A typo in a built-in key gets a did-you-mean, whatever the program calls it.
        with open(grid, encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g["grid"] = {"train.learning_rate": [1.0e-2]}
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        p = sweep("plan", grid)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("unknown key 'train.learning_rate' (did you mean 'train.lr'?)", p.stderr, show(p))


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
