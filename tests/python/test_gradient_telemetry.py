#!/usr/bin/python3
"""Gradient telemetry for a PyTorch script: sweep.init()'s run.gradients() (python/sweep/run.py)
and sweep.invariant.tensor_grad_norms.

a. A script's rows: every N steps, the last, a planted loss spike, a planted inf gradient; each
   row's norms are the tensors' own; `sweep show` names the spike's tensors and the non-finite
   tensor, which the script never logged.
b. The spike rule is the readers' (results/analysis/run_health.h): the steps the script took
   rows for are the steps `sweep show` counts as spikes.
c. A resumed script carries its earlier attempt's rows: its record's telemetry and each rank's
   own norms are those of the run trained straight through.
d. Bad calls raise ValueError and name what is wrong; outside sweep without `out` nothing is
   written.
e. tensor_grad_norms has the same bits for any thread count.

Usage: test_gradient_telemetry.py [BIN_DIR] [unittest options]; BIN_DIR holds sweep.
"""

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402

try:
    import torch
except ImportError:  # Debian's python3-torch
    torch = None

# A script of its own: a small MLP on random regression data, 30 steps; argv: OUT MODE.
# Modes: "plain"; "faults" (loss x50 at step 23, an inf in 2.weight's gradient at step 27);
# "crash" (a checkpoint after step 12, then the process dies at step 15 before its log);
# "resume" (resumes that checkpoint). Each prints "why STEP WHY" for every row it took.
PROGRAM = r'''
import os, sys
import torch
import sweep
out, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 96), torch.nn.Tanh(), torch.nn.Linear(96, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
run = sweep.init({"steps": 30, "lr": 1e-2}, out=out)
start = run.resume(model, optimizer) + 1
run.watch(model)
for step in range(start, 31):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)
    loss = ((model(x) - y) ** 2).mean()
    if mode == "faults" and step == 23:
        loss = loss * 50
    optimizer.zero_grad()
    loss.backward()
    if mode == "faults" and step == 27:
        model[2].weight.grad[1, 3] = float("inf")
    if mode == "faults" and step in (10, 27):  # the gradients of the rows, for the test to check
        torch.save([p.grad.clone() for p in model.parameters()], os.path.join(out, "grads_%d.pt" % step))
    if mode == "crash" and step == 15:
        os._exit(3)  # dies mid-step: the record stays partial
    # Each rank's own norm (one rank here: the step's own) goes to /ranks/grad_norm.
    why = run.gradients(step, loss, rank_norms=[1.0 + step / 8])
    if why:
        print("why", step, why, flush=True)
    if step != 27:
        optimizer.step()
    run.log(step, loss.item())
    if step == 12:
        run.checkpoint(step, model, optimizer)
run.finish()
'''


def run_program(out, mode):
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(cli_util.ROOT, "python"))
    return subprocess.run([sys.executable, "-c", PROGRAM, out, mode], capture_output=True, text=True, timeout=300,
                          env=env)


def telemetry_of(out):
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        t = f["telemetry"]
        rows = [(int(s), w.decode(), n.tolist()) for s, w, n in zip(t["step"][:], t["why"][:],
                                                                      t["tensor_grad_norm"][:])]
        return rows, f["ranks/grad_norm"][:].tolist(), [x.decode() for x in f["params/name"][:]]


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class ScriptRows(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="grad_telemetry_test.")
        cls.out = os.path.join(cls.tmp, "faults")
        cls.result = run_program(cls.out, "faults")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_rows_every_ten_steps_the_last_a_spike_and_an_inf_gradient(self):
        self.assertEqual(self.result.returncode, 0, show(self.result))
        self.assertEqual(re.findall(r"why (\d+) (\S+)", self.result.stdout),
                         [("10", "every"), ("20", "every"), ("23", "spike"), ("27", "nonfinite"),
                          ("30", "every,last")])
        rows, rank_norms, names = telemetry_of(self.out)
        self.assertEqual([(s, w) for s, w, _ in rows],
                         [(10, "every"), (20, "every"), (23, "spike"), (27, "nonfinite"), (30, "every,last")])
        self.assertEqual(names, ["0.weight", "0.bias", "2.weight", "2.bias"])
        # Each row holds each tensor's own norm (against float64 numpy); inf where it was.
        for step in (10, 27):
            grads = torch.load(os.path.join(self.out, "grads_%d.pt" % step))
            norms = next(n for s, _, n in rows if s == step)
            for name, g, n in zip(names, grads, norms):
                want = float(np.linalg.norm(g.numpy().astype(np.float64).ravel()))
                if math.isinf(want):
                    self.assertTrue(math.isinf(n), (step, name, n))
                else:
                    self.assertAlmostEqual(n / want, 1.0, delta=1e-6, msg=(step, name))
        self.assertEqual([math.isfinite(x) for x in rows[3][2]], [True, True, False, True])
        # The rank norms the script passed, one row per step.
        self.assertEqual(rank_norms, [[1.0 + s / 8] for s in range(1, 31)])

    def test_a2_sweep_show_names_the_spikes_tensors_and_the_nonfinite_one(self):
        self.assertEqual(self.result.returncode, 0, show(self.result))
        p = sweep("show", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("verdict:     verified by its digest", p.stdout, show(p))
        # The script logged no grad_norm: the inf is known from its telemetry row alone.
        self.assertIn("nonfinite_gradient: 1 of 30 steps had a finite loss but a non-finite gradient, the first at "
                      "step 27, first in tensor 2.weight (its /telemetry row).", p.stdout, show(p))
        self.assertRegex(p.stdout, r"loss_spike: the loss spiked at step 23: .*the gradient norms that rose most at "
                                   r"that step, against their median over the 2 telemetry rows before it: ")
        self.assertIn("telemetry:   rows: 5 (3 every, 1 last, 1 nonfinite, 1 spike)", p.stdout, show(p))


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class TensorNorms(unittest.TestCase):
    def test_c_each_tensors_norm_is_its_blocked_square_sum(self):
        # tensor_grad_norms batches its reductions; each norm must keep the bits of the
        # definition: the tensor's blocks by _square_sum_by_blocks, then the square root.
        from sweep import invariant
        gen = torch.Generator().manual_seed(3)
        sizes = [1, 3, 100, 4095, 4096, 4097, 8192, 12289, 50000, 140000, 1200000]  # the last: > 256 blocks
        for trial in range(40):
            tensors = []
            for i in range(1 + trial % 9):
                n = sizes[(trial * 7 + i * 3) % len(sizes)]
                t = torch.randn(n, generator=gen) * (10.0 ** ((trial + i) % 7 - 3))
                tensors.append(None if (trial + i) % 11 == 5 else t.bfloat16() if (trial + i) % 5 == 0 else t)
            want = [0.0 if t is None else math.sqrt(invariant._square_sum_by_blocks(t.reshape(-1).float()).item())
                    for t in tensors]
            got = invariant.tensor_grad_norms(tensors)
            self.assertEqual([x.hex() for x in got], [x.hex() for x in want], "trial %d" % trial)


class SpikeRule(unittest.TestCase):
    def test_b_the_steps_the_script_took_for_spikes_are_the_readers_spikes(self):
        # 200 steps of a noisy loss with jumps of several sizes: some are spikes by the rule,
        # some are not; the script's "spike" rows must be exactly the readers' spike steps.
        import sweep as sweep_api
        tmp = tempfile.mkdtemp(prefix="grad_telemetry_spikes.")
        self.addCleanup(shutil.rmtree, tmp, True)
        rng = np.random.default_rng(7)
        run = sweep_api.init({"steps": 200}, out=tmp)
        run.watch([("w", torch.zeros(3))], telemetry_every=0)
        spikes = []
        for step in range(1, 201):
            loss = 2.0 + 0.1 * rng.standard_normal()
            if step % 17 == 0:
                loss *= 1.0 + 0.1 * (step // 17)  # +10%, +20%, ... +110%
            if "spike" in run.gradients(step, loss, grad_norm=1.0, tensor_norms=[1.0]):
                spikes.append(step)
            run.log(step, loss)
        run.finish()
        self.assertGreaterEqual(len(spikes), 3, spikes)
        self.assertLess(len(spikes), 11, spikes)  # the small jumps are noise
        p = sweep("show", tmp)
        self.assertEqual(p.returncode, 0, show(p))
        line = re.search(r"loss_spike: the loss spiked at step (\d+):.*", p.stdout)
        self.assertIsNotNone(line, show(p))
        self.assertEqual(int(line.group(1)), spikes[0], show(p))
        self.assertIn("; %d steps in all were that far above their running median" % len(spikes), line.group(0))


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class Resume(unittest.TestCase):
    def test_c_a_resumed_scripts_telemetry_is_the_straight_runs(self):
        tmp = tempfile.mkdtemp(prefix="grad_telemetry_resume.")
        self.addCleanup(shutil.rmtree, tmp, True)
        straight, broken = os.path.join(tmp, "straight"), os.path.join(tmp, "broken")
        p = run_program(straight, "plain")
        self.assertEqual(p.returncode, 0, show(p))
        p = run_program(broken, "crash")
        self.assertEqual(p.returncode, 3, show(p))
        self.assertFalse(os.path.exists(os.path.join(broken, "record.h5")))
        p = run_program(broken, "resume")
        self.assertEqual(p.returncode, 0, show(p))
        # Rows 10 (from the first attempt), 20 and 30: the same bits as straight through.
        self.assertEqual(telemetry_of(broken), telemetry_of(straight))
        self.assertEqual([s for s, _, _ in telemetry_of(broken)[0]], [10, 20, 30])
        c = sweep("compare", straight, broken)
        self.assertEqual(c.returncode, 0, show(c))
        self.assertIn("identical bit-for-bit", c.stdout, show(c))


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class BadCalls(unittest.TestCase):
    def setUp(self):
        import sweep as sweep_api
        self.tmp = tempfile.mkdtemp(prefix="grad_telemetry_bad.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.model = torch.nn.Linear(3, 2)
        self.run = sweep_api.init({"steps": 5}, out=self.tmp)
        self.run.watch(self.model, telemetry_every=1)
        self.model(torch.ones(1, 3)).sum().backward()

    def test_d_each_bad_call_names_what_is_wrong_and_writes_nothing(self):
        run = self.run
        self.assertEqual(run.gradients(1, 0.5), "every")
        with self.assertRaisesRegex(ValueError, r"gradients: step 1 after step 1; once per step, in step order"):
            run.gradients(1, 0.5)
        with self.assertRaisesRegex(ValueError, r"gradients: 2 rank norms for a world of 1"):
            run.gradients(2, 0.5, rank_norms=[1.0, 2.0])
        with self.assertRaisesRegex(ValueError, r"gradients: 3 tensor norms, but the record's parameter table has 2"):
            run.gradients(3, 0.5, tensor_norms=[1.0, 2.0, 3.0])
        run.log(1, 0.5)
        run.finish()
        with h5py.File(os.path.join(self.tmp, "record.h5"), "r") as f:
            self.assertEqual(f["telemetry/step"][:].tolist(), [1])  # the bad calls added no row
            self.assertEqual(f.attrs["status"], "completed")

    def test_d2_no_model_and_no_record(self):
        import sweep as sweep_api
        bare = sweep_api.init({"steps": 5})  # outside sweep, no out: nothing is written
        with self.assertRaisesRegex(ValueError, r"gradients: no model; pass one or call watch\(model\) first"):
            bare.gradients(1, 0.5)
        self.assertEqual(bare.gradients(2, 0.5, self.model), "")
        self.assertEqual(bare.gradients(5, 0.5, self.model), "last")
        self.assertIsNone(bare.last_telemetry)  # decided, not recorded
        self.run.finish()


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class StepNorm(unittest.TestCase):
    def test_f_blocked_norms_only_for_a_row_and_a_norm_spike_still_takes_one(self):
        # The per-step norm of the spike rule is torch's (cheap); the blocked norms, a few
        # tensor operations per tensor, are computed only on the steps that take a row.
        import sweep as sweep_api
        import sweep.invariant as invariant
        tmp = tempfile.mkdtemp(prefix="grad_telemetry_step_norm.")
        self.addCleanup(shutil.rmtree, tmp, True)
        blocked = []
        real = invariant.tensor_grad_norms

        def counted(tensors):
            blocked.append(len(tensors))
            return real(tensors)
        invariant.tensor_grad_norms = counted
        self.addCleanup(setattr, invariant, "tensor_grad_norms", real)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
        run = sweep_api.init({"steps": 40}, out=tmp)
        run.watch(model)
        rows = {}
        for step in range(1, 41):
            g = torch.Generator().manual_seed(step)
            model.zero_grad()
            ((model(torch.randn(16, 8, generator=g)) - 1.0) ** 2).mean().backward()
            if step == 33:  # the gradient alone spikes: the loss stays as it was
                for p in model.parameters():
                    p.grad.mul_(100.0)
            want = float(np.linalg.norm(np.concatenate([p.grad.double().reshape(-1).numpy()
                                                        for p in model.parameters()])))
            why = run.gradients(step, 0.5)
            self.assertAlmostEqual(run.last_grad_norm / want, 1.0, delta=1e-6)
            if why:
                rows[step] = why
            run.log(step, 0.5)
        run.finish()
        self.assertEqual(rows, {10: "every", 20: "every", 30: "every", 33: "spike", 40: "every,last"})
        self.assertEqual(blocked, [4] * 5)  # one blocked measurement a row, none on the other 35 steps


    def test_g_clip_grad_norm_is_torchs_clip_with_the_rows_taken_before_it(self):
        # run.clip_grad_norm_ against torch.nn.utils.clip_grad_norm_ on a copy of the same
        # model and gradient: the same norm and the same clipped gradient, bit for bit, with
        # the clip biting (max_norm 0.05) and not (inf); a row holds the norms before clipping.
        import copy
        import sweep as sweep_api
        from sweep.invariant import tensor_grad_norms
        tmp = tempfile.mkdtemp(prefix="grad_telemetry_clip.")
        self.addCleanup(shutil.rmtree, tmp, True)
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(8, 300), torch.nn.Tanh(), torch.nn.Linear(300, 3))
        twin = copy.deepcopy(model)
        run = sweep_api.init({"steps": 20}, out=tmp)
        run.watch(model, telemetry_every=5)
        clipped = 0
        for step in range(1, 21):
            g = torch.Generator().manual_seed(step)
            x, y = torch.randn(16, 8, generator=g), torch.randn(16, 3, generator=g)
            for m in (model, twin):
                m.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
            before = tensor_grad_norms([p.grad for p in model.parameters()])
            max_norm = float("inf") if step % 3 == 0 else 0.05
            norm = run.clip_grad_norm_(step, 0.5, max_norm)
            want = torch.nn.utils.clip_grad_norm_(twin.parameters(), max_norm)
            self.assertEqual(norm, want.item(), step)
            self.assertEqual(run.last_grad_norm, want.item(), step)
            clipped += norm > max_norm
            for p, q in zip(model.parameters(), twin.parameters()):
                self.assertTrue(torch.equal(p.grad, q.grad), step)
            if run.last_telemetry and run.last_telemetry[0] == step:
                self.assertEqual(run.last_telemetry[2], before, step)  # taken before the clip
            for p, q in zip(model.parameters(), twin.parameters()):
                with torch.no_grad():
                    p.sub_(0.1 * p.grad)
                    q.sub_(0.1 * q.grad)
            run.log(step, 0.5, grad_norm=norm)
        run.finish()
        self.assertGreater(clipped, 5)  # the clip did bite
        with h5py.File(os.path.join(tmp, "record.h5"), "r") as f:
            self.assertEqual(f["telemetry/step"][:].tolist(), [5, 10, 15, 20])


@unittest.skipIf(torch is None, "needs Debian's python3-torch")
class Norms(unittest.TestCase):
    def test_e_the_same_bits_for_any_thread_count(self):
        from sweep.invariant import tensor_grad_norms
        g = torch.Generator().manual_seed(3)
        tensors = [torch.randn(300_001, generator=g) * 1e-3, torch.randn(64, 4096, generator=g), None,
                   torch.randn(7, generator=g).to(torch.bfloat16)]
        threads = torch.get_num_threads()
        self.addCleanup(torch.set_num_threads, threads)
        seen = []
        for n in (1, 2, 4):
            torch.set_num_threads(n)
            seen.append(tensor_grad_norms(tensors))
        self.assertEqual(seen[0], seen[1])
        self.assertEqual(seen[0], seen[2])
        self.assertEqual(seen[0][2], 0.0)
        for t, n in zip(tensors, seen[0]):
            if t is not None:
                want = float(np.linalg.norm(t.float().numpy().astype(np.float64)))
                self.assertAlmostEqual(n / want, 1.0, delta=1e-6)


if __name__ == "__main__":
    if len(sys.argv) > 1 and os.path.isdir(sys.argv[1]):
        cli_util.BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main()
