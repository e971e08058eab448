#!/usr/bin/python3
"""python/sweep/invariant.py (issue 37): the promise for PyTorch scripts.

a. The tree is the C++ one: tests/data/canonical_tree_vectors.json (leaf vectors as fp32
   bit patterns, their canonical sums, the covers of rank ranges and uneven ranges, sibling
   pairs, float64 loss sums) is what docs/design.md's definition gives, and sweep.invariant
   reproduces every bit of it (tests/unit/canonical_vectors_test.cpp checks the C++ side).
b. The pieces in one process: the sampler and Markov source against values printed by the
   C++ ones, NodeAccumulator over every layout against TreeAccumulator, the accumulator's
   checks (a leaf too many or too few, a stray gradient, a gradient set by hand, a step
   without reduce, bf16 parameters).
c. examples/pytorch-invariant/train.py under mpiexec (gloo): W=1xA=4 = W=2xA=2 = W=4xA=1
   and W=1xA=6 = W=2xA=3 = W=3xA=2, in fp32 and in bf16 autocast, with dropout, clipping,
   AdamW and held-out evaluation, give the same losses, gradient norms, held-out losses and
   parameter checksums at every step; with --leaf the micro-batch size is layout too; a
   checkpoint saved on one layout and resumed on another gives the run trained straight
   through; --plain-ddp (DDP and gradient accumulation) differs across the same layouts.
   Each run is read back from the record it writes through sweep.init() (steps, parameter
   checksums, held-out losses in /eval).
d. Bad input, each one clear error and a non-zero exit before the step is applied: a
   global batch that does not split over the layout, a stray backward() on one rank, DDP's
   all-reduce left on, parameters that differ across ranks, bf16 parameters.
e. `sweep run` of a trimmed sweeps/pytorch-invariance.yaml (the example as a grid's
   program on sweep.init(), torch.distributed from the env:// variables sweep sets):
   W=1xA=6, W=2xA=3 and W=3xA=2 of one global batch are one bit-identical class in
   `sweep report --format json`, with their held-out losses in the records.

Usage: test_invariant.py [BIN_DIR] [--write-vectors] [unittest options]. BIN_DIR holds sweep
(for e; default $SWEEP_BIN_DIR, else build/bin). --write-vectors rewrites the vectors file
from the reference below (only when the definition itself changes).
"""

import json
import math
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:  # ctest counts exit 77 as skipped
    print("test_invariant.py: skipped: %s (python3-torch, python3-numpy and python3-h5py are needed)" % e)
    sys.exit(77)

sys.path.insert(0, HERE)
import cli_util  # noqa: E402

from sweep import invariant as inv  # noqa: E402

TRAIN = os.path.join(ROOT, "examples", "pytorch-invariant", "train.py")
VECTORS = os.path.join(ROOT, "tests", "data", "canonical_tree_vectors.json")
MPIEXEC = shutil.which("mpiexec") or "mpiexec"


# ---------------------------------------------------------------------------------------
# The reference: docs/design.md's definitions written out literally, independent of the
# module, and the vectors file made from them.

def ref_split(n):
    p = 1
    while p * 2 < n:
        p *= 2
    return p


def ref_tree(leaves, lo, hi):
    """tree(lo,hi) = tree(lo,lo+P) + tree(lo+P,hi) over numpy float32 vectors."""
    if hi - lo == 1:
        return leaves[lo].copy()
    p = ref_split(hi - lo)
    return (ref_tree(leaves, lo, lo + p) + ref_tree(leaves, lo + p, hi)).astype(np.float32)


def ref_tree_f64(values, lo, hi):
    if hi - lo == 1:
        return values[lo]
    p = ref_split(hi - lo)
    return ref_tree_f64(values, lo, lo + p) + ref_tree_f64(values, lo + p, hi)


def ref_nodes(lo, count, parent=None, out=None):
    """Every node of the canonical tree over [lo, lo + count) with its parent."""
    out = [] if out is None else out
    out.append(((lo, count), parent))
    if count > 1:
        p = ref_split(count)
        ref_nodes(lo, p, (lo, count), out)
        ref_nodes(lo + p, count - p, (lo, count), out)
    return out


def ref_cover(leaves, a, b):
    """The tree's nodes inside [a, b) whose parents are not, in leaf order."""
    inside = lambda node: node is not None and a <= node[0] and node[0] + node[1] <= b  # noqa: E731
    return sorted(node for node, parent in ref_nodes(0, leaves) if inside(node) and not inside(parent))


def hex32(vec):
    return ["%08x" % v for v in np.asarray(vec, dtype=np.float32).view(np.uint32)]


def unhex32(words):
    return np.array([int(w, 16) for w in words], dtype=np.uint32).view(np.float32)


def hex64(x):
    return "%016x" % struct.unpack("<Q", struct.pack("<d", x))[0]


def unhex64(word):
    return struct.unpack("<d", struct.pack("<Q", int(word, 16)))[0]


VECTOR_SEED, VECTOR_LENGTH = 37, 13
LEAF_COUNTS = [1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16]


def exact_magnitudes(rng, shape, low_exp, high_exp):
    """Magnitudes in [2^low_exp, 2^high_exp) made by exactly rounded operations only: a
    53-bit integer mantissa, scaled by a power of two (ldexp is exact away from the
    subnormals). No libm or SIMD transcendental (`10.0 ** x` rounds one way on AVX-512 and
    another on AVX2), so every x86-64 machine writes the same file."""
    mantissa = rng.integers(1 << 52, 1 << 53, shape, dtype=np.int64).astype(np.float64)  # exact: < 2^53
    return np.ldexp(mantissa, rng.integers(low_exp, high_exp, shape) - 52)


def leaf_values(rng, count):
    """Leaves whose fp32 sums change bits when their order changes: random sign, magnitude
    2^-10..2^10; element 0 is -0 in every leaf (the sum stays -0), element 1 a mix of +0 and
    -0, element 2 subnormal."""
    mags = exact_magnitudes(rng, (count, VECTOR_LENGTH), -10, 10)
    signs = np.where(rng.integers(0, 2, (count, VECTOR_LENGTH)) == 0, -1.0, 1.0)
    v = (signs * mags).astype(np.float32)  # one correctly rounded narrowing
    v[:, 0] = -0.0
    v[:, 1] = np.where(rng.integers(0, 2, count) == 0, -0.0, 0.0)
    v[:, 2] = rng.integers(-1000, 1000, count).astype(np.float32) * np.float32(2.0 ** -149)
    return v


def make_vectors():
    rng = np.random.Generator(np.random.PCG64(VECTOR_SEED))
    cases = []
    for n in LEAF_COUNTS:
        leaves = list(leaf_values(rng, n))
        losses = [float(x) for x in exact_magnitudes(rng, n, -20, 30)]
        layouts = [w for w in range(1, n + 1) if n % w == 0]
        ranges = {(r * n // w, (r + 1) * n // w) for w in layouts for r in range(w)}
        ranges |= {(a, b) for a, b in [(1, n), (0, n - 1), (1, n - 1), (n // 3, 2 * n // 3 + 1), (n // 2, n)]
                   if 0 <= a < b <= n}
        covers = []
        for a, b in sorted(ranges):
            nodes = ref_cover(n, a, b)
            covers.append({"range": [a, b], "nodes": [list(node) for node in nodes],
                           "sums": [hex32(ref_tree(leaves, lo, lo + c)) for lo, c in nodes]})
        siblings = []
        for (lo, count), parent in ref_nodes(0, n):
            if count > 1:  # its two children are siblings; a child with its neighbour outside is not
                p = ref_split(count)
                siblings.append([lo, p, lo + p, count - p, True])
                if lo + count < n:
                    siblings.append([lo + p, count - p, lo + count, 1, False])
        if n >= 3:
            siblings.append([0, 1, 1, 2, False])  # adjacent, but [0,3) is no node
        cases.append({"leaves": n, "values": [hex32(v) for v in leaves], "total": hex32(ref_tree(leaves, 0, n)),
                      "covers": covers, "layouts": layouts, "siblings": siblings,
                      "losses": [hex64(x) for x in losses], "loss_total": hex64(ref_tree_f64(losses, 0, n))})
    return {"about": "Canonical tree test vectors (docs/design.md, Canonical reduction), checked by "
                     "tests/unit/canonical_vectors_test.cpp (C++) and tests/python/test_invariant.py (Python); "
                     "written by test_invariant.py --write-vectors from numpy PCG64 seed %d: leaf vectors of "
                     "%d fp32 words (bit patterns in hex), their canonical tree sum, the canonical cover of "
                     "each rank's range for every world size dividing the leaves and of uneven ranges with "
                     "each node's sum, sibling pairs [lo, count, lo, count, siblings?], and float64 loss "
                     "leaves with their canonical sum." % (VECTOR_SEED, VECTOR_LENGTH),
            "length": VECTOR_LENGTH, "cases": cases}


def same_bits(a, b):
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


class TreeVectors(unittest.TestCase):
    """a. The shared vectors, from the Python side."""

    @classmethod
    def setUpClass(cls):
        with open(VECTORS, encoding="utf-8") as f:
            cls.vectors = json.load(f)

    def test_file_is_the_reference(self):
        self.assertEqual(self.vectors, make_vectors(), "tests/data/canonical_tree_vectors.json is not what the "
                         "reference gives; regenerate it only if the definition changed (--write-vectors)")

    def test_vectors_have_teeth(self):
        """Summed left to right (arrival order), every case of 4 or more leaves gives other
        bits (up to 3 leaves that order is the tree's): a wrong order is caught."""
        for case in self.vectors["cases"]:
            leaves = [unhex32(v) for v in case["values"]]
            seq = leaves[0].copy()
            for leaf in leaves[1:]:
                seq = (seq + leaf).astype(np.float32)
            self.assertEqual(same_bits(seq, unhex32(case["total"])), case["leaves"] <= 3, case["leaves"])

    def test_module_reproduces_every_bit(self):
        for case in self.vectors["cases"]:
            n = case["leaves"]
            leaves = [torch.from_numpy(unhex32(v)) for v in case["values"]]
            total = unhex32(case["total"])
            acc = inv.TreeAccumulator()
            for leaf in leaves:
                acc.push(leaf)
            self.assertTrue(same_bits(acc.finish(), total), "TreeAccumulator, %d leaves" % n)
            covers = {tuple(c["range"]): c for c in case["covers"]}
            for (a, b), c in covers.items():
                nodes = inv.canonical_cover(n, a, b)
                self.assertEqual([list(node) for node in nodes], c["nodes"], "cover of [%d, %d) of %d" % (a, b, n))
                node_acc = inv.NodeAccumulator(n, VECTOR_LENGTH)
                for j in range(a, b):  # one leaf at a time, as CanonicalGradients folds them
                    node_acc.push(inv.TreeNode(j, 1), leaves[j].clone())
                self.assertEqual(node_acc.nodes(), nodes)
                for got, want in zip(node_acc.sums(), c["sums"]):
                    self.assertTrue(same_bits(got, unhex32(want)), "node sums of [%d, %d) of %d" % (a, b, n))
            for w in case["layouts"]:
                nodes, pieces = [], []
                for r in range(w):
                    c = covers[(r * n // w, (r + 1) * n // w)]
                    nodes += [inv.TreeNode(*node) for node in c["nodes"]]
                    pieces += [torch.from_numpy(unhex32(s)) for s in c["sums"]]
                out = inv.tree_over_nodes(nodes, pieces, n, out=torch.empty(VECTOR_LENGTH), scratch=pieces)
                self.assertTrue(same_bits(out, total), "tree_over_nodes, %d ranks of %d leaves" % (w, n))
            for lo1, c1, lo2, c2, expected in case["siblings"]:
                got = inv.canonical_siblings(n, inv.TreeNode(lo1, c1), inv.TreeNode(lo2, c2))
                self.assertEqual(got, expected, "siblings [%d,+%d) [%d,+%d) of %d" % (lo1, c1, lo2, c2, n))
            losses = [unhex64(x) for x in case["losses"]]
            self.assertEqual(hex64(inv.canonical_sum(losses)), case["loss_total"], "canonical_sum of %d" % n)


# ---------------------------------------------------------------------------------------

class Pieces(unittest.TestCase):
    """b. The module in one process."""

    def test_markov_source_and_permutation_are_sweep_trains(self):
        # Printed by trainer/data/synthetic_data.cpp's MarkovSource and epoch_permutation.
        src = inv.MarkovSource(0, 256, 4)
        self.assertEqual(src.sequences([0, 1, 99, 123456789], 10).tolist(), [
            [5, 246, 56, 157, 165, 154, 179, 192, 89, 10], [26, 149, 115, 232, 118, 4, 255, 73, 163, 22],
            [141, 55, 122, 173, 107, 122, 173, 152, 91, 115], [235, 188, 207, 47, 213, 180, 91, 115, 255, 73]])
        self.assertEqual(inv.MarkovSource(7, 100, 3).sequences([5], 20)[0].tolist(),
                         [22, 30, 69, 55, 59, 10, 19, 27, 94, 56, 67, 37, 58, 88, 62, 91, 71, 98, 74, 91])
        self.assertEqual(inv.epoch_permutation(42, 3, 10), [5, 8, 3, 0, 7, 9, 2, 1, 4, 6])
        self.assertEqual(sum((i + 1) * v for i, v in enumerate(inv.epoch_permutation(5, 0, 4096))), 16991833032)
        self.assertEqual(inv.mix_keys((1 << 64) - 1, 3, 4, 5), 11160181249082185560)

    def test_sampler_rows_do_not_depend_on_the_layout(self):
        source = inv.MarkovSource(1, 50, 3)

        def step_rows(world, accum, step):
            rows = []
            for r in range(world):
                s = inv.Sampler(source, 9, 40, 6, inv.Layout(12, world, r, accum=accum))
                rows += [s.batch(step, k) for k in range(accum)]
            return torch.cat(rows).tolist()

        for step in (0, 3, 7):  # step 3 crosses from epoch 0 (40 samples) into epoch 1
            first = step_rows(1, 1, step)
            for world, accum in [(1, 6), (2, 3), (3, 2), (6, 1), (4, 3)]:
                self.assertEqual(step_rows(world, accum, step), first, "W=%d A=%d step %d" % (world, accum, step))

    def test_node_accumulator_over_every_layout_is_the_one_process_tree(self):
        rng = np.random.Generator(np.random.PCG64(5))
        for n in range(1, 13):
            leaves = [torch.from_numpy(x) for x in leaf_values(rng, n)]
            acc = inv.TreeAccumulator()
            for leaf in leaves:
                acc.push(leaf)
            total = acc.finish()
            for w in (w for w in range(1, n + 1) if n % w == 0):
                nodes, pieces = [], []
                for r in range(w):
                    node_acc = inv.NodeAccumulator(n, VECTOR_LENGTH)
                    for j in range(r * n // w, (r + 1) * n // w):
                        node_acc.push(inv.TreeNode(j, 1), leaves[j].clone())
                    self.assertEqual(node_acc.nodes(), inv.canonical_cover(n, r * n // w, (r + 1) * n // w))
                    nodes += node_acc.nodes()
                    pieces += node_acc.sums()
                self.assertTrue(same_bits(inv.tree_over_nodes(nodes, pieces, n), total), "%d ranks, %d leaves" % (w, n))

    def test_tree_sum_of_a_tensor_is_canonical_sum(self):
        rng = np.random.Generator(np.random.PCG64(6))
        for n in range(1, 41):
            v = rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-8, 8, n)
            self.assertEqual(inv._tree_sum(torch.from_numpy(v)).item(), inv.canonical_sum(v.tolist()), n)

    def test_layouts_that_do_not_split_the_batch(self):
        for kwargs, needle in [
                (dict(world_batch=10, world_size=3), "the global batch of 10 sequences does not split over 3 ranks "
                                                     "x 1 accumulation steps"),
                (dict(world_batch=12, world_size=2, micro_batch=5), "does not split over 2 ranks x micro-batches of 5"),
                (dict(world_batch=12, world_size=2, accum=2, micro_batch=2), "2 ranks x 2 accumulation steps x "
                                                                             "micro-batches of 2 are 8 sequences"),
                (dict(world_batch=12, world_size=2, micro_batch=6, leaf=4), "a leaf of 4 sequences does not divide")]:
            with self.assertRaises(inv.InvariantError) as e:
                inv.Layout(**kwargs)
            self.assertIn(needle, str(e.exception))
            self.assertTrue(e.exception.everywhere)

    def accumulator(self, **kwargs):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
        layout = inv.Layout(4, accum=4)
        return model, inv.CanonicalGradients(model, layout, tokens_per_step=4, **kwargs)

    def test_accumulator_checks(self):
        x = torch.randn(4, 4)
        loss = lambda model, k: model(x[k:k + 1]).square().sum()  # noqa: E731
        # A leaf too many; too few at reduce().
        model, grads = self.accumulator()
        for k in range(4):
            grads.backward(loss(model, k))
        with self.assertRaisesRegex(inv.InvariantError, "rank 0: a leaf more than this rank's share of 4"):
            grads.backward(loss(model, 0))
        model, grads = self.accumulator()
        grads.backward(loss(model, 0))
        with self.assertRaisesRegex(inv.InvariantError, "rank 0: 1 leaves were folded, this rank's share of the "
                                                        "step is 4"):
            grads.reduce()
        # A stray backward between leaves, and one after reduce(): caught before the step.
        model, grads = self.accumulator()
        grads.backward(loss(model, 0))
        loss(model, 1).backward()
        with self.assertRaisesRegex(inv.InvariantError, "rank 0: a gradient reached parameter '.*' outside "
                                                        "CanonicalGradients.backward"):
            grads.backward(loss(model, 2))
        model, grads = self.accumulator()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for k in range(4):
            grads.backward(loss(model, k))
        grads.reduce()
        before = [p.detach().clone() for p in model.parameters()]
        loss(model, 0).backward()
        with self.assertRaisesRegex(inv.InvariantError, "outside CanonicalGradients.backward"):
            grads.step(opt)
        self.assertTrue(all(torch.equal(a, p) for a, p in zip(before, model.parameters())), "the step was applied")
        # A gradient set by hand; a step without reduce().
        model, grads = self.accumulator()
        model[0].bias.grad = torch.ones(8)
        with self.assertRaisesRegex(inv.InvariantError, "parameter '0.bias' holds a gradient CanonicalGradients "
                                                        "did not put there"):
            grads.backward(loss(model, 0))
        model, grads = self.accumulator()
        with self.assertRaisesRegex(inv.InvariantError, "optimizer step without reduce"):
            grads.step(torch.optim.SGD(model.parameters(), lr=0.1))
        # bf16 parameters.
        model = torch.nn.Linear(4, 3).to(torch.bfloat16)
        with self.assertRaisesRegex(inv.InvariantError, "parameter 'weight' is bfloat16: the canonical accumulator "
                                                        "sums fp32 gradients"):
            inv.CanonicalGradients(model, inv.Layout(4), 4)

    def test_the_step_is_the_one_process_sum_of_leaf_gradients(self):
        x = torch.randn(4, 4)
        model, grads = self.accumulator()
        leaf_grads, leaf_losses = [], []
        for k in range(4):
            model.zero_grad(set_to_none=True)
            total = model(x[k:k + 1]).square().sum()
            (total / 4).backward()
            leaf_grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
            leaf_losses.append(total.item())
        model.zero_grad(set_to_none=True)
        grads._stray = None  # those backward() calls were this test's reference, outside on purpose
        for k in range(4):
            grads.backward(model(x[k:k + 1]).square().sum())
        result = grads.reduce()
        acc = inv.TreeAccumulator()
        for g in leaf_grads:
            acc.push(g)
        self.assertTrue(same_bits(grads.flat_gradient(), acc.finish()))
        self.assertEqual(result.loss, inv.canonical_sum(leaf_losses) / 4)
        self.assertTrue(all(p.grad.data_ptr() for p in model.parameters()))


# ---------------------------------------------------------------------------------------
# Under mpiexec

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpirun(ranks, argv, timeout=300):
    """argv (a Python script and its arguments) on `ranks` ranks of mpiexec, gloo over
    127.0.0.1 on a free port."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), MASTER_PORT=str(free_port()))
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK"):  # a launcher's, not ours
        env.pop(var, None)
    cmd = [MPIEXEC, "--oversubscribe", "-n", str(ranks), sys.executable] + list(argv)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def show(p):
    return "exit %s\n--- stdout\n%s\n--- stderr\n%s" % (p.returncode, p.stdout[-4000:], p.stderr[-4000:])


def rows_of(out, rank_norms=None):
    """The record's rows without the wall times, what must be bit-identical: per step the
    loss, learning rate, gradient norm, clip coefficient, tokens, the held-out loss (/eval;
    None without one), the parameter checksum (None where none was recorded) and the
    gradient telemetry row ((why, each tensor's norm); None where none was taken). Each
    rank's own norm depends on the layout: it goes to the list `rank_norms`, if given."""
    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        m = f["metrics"]
        checksums = dict(zip(f["checksums/step"][:].tolist(), f["checksums/params"][:].tolist()))
        evals = dict(zip(f["eval/step"][:].tolist(), f["eval/loss"][:].tolist())) if "eval" in f else {}
        t = f["telemetry"]
        telemetry = {s: (w.decode(), n) for s, w, n in zip(t["step"][:].tolist(), t["why"][:],
                                                           t["tensor_grad_norm"][:].tolist())}
        if rank_norms is not None and "grad_norm" in f["ranks"]:  # plain DDP has none
            rank_norms.extend(f["ranks/grad_norm"][:].tolist())
        rows = []
        for i, step in enumerate(m["step"][:].tolist()):
            rows.append({"step": step, "loss": float(m["loss"][i]), "lr": float(m["lr"][i]),
                         "grad_norm": float(m["grad_norm"][i]), "clip_coef": float(m["clip_coef"][i]),
                         "tokens": int(m["tokens"][i]), "eval_loss": evals.get(step),
                         "checksum": "%016x" % checksums[step] if step in checksums else None,
                         "telemetry": telemetry.get(step)})
        assert f.attrs["status"] == "completed", f.attrs["status"]
        assert 0 in checksums, "no checksum of the initial parameters"
    return rows


# Small enough for 2 cores: 6 steps of a 16-wide model on 8-token sequences; clip 0.3 clips
# (the norm runs 0.4-0.6), dropout and held-out evaluation at steps 3 and 6.
COMMON = ["--steps", "6", "--vocab", "32", "--seq-len", "8", "--width", "16", "--lr", "1e-2", "--warmup", "2",
          "--telemetry-every", "2",
          "--clip", "0.3", "--dropout", "0.1", "--eval-every", "3", "--eval-batches", "2", "--samples", "256",
          "--quiet"]
GROUPS = {8: [(1, 4), (2, 2), (4, 1)], 12: [(1, 6), (2, 3), (3, 2)]}


class Layouts(unittest.TestCase):
    """c. The example under mpiexec."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="invariant_test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    rank_norms = {}  # run name -> /ranks/grad_norm rows

    def train(self, name, world, args):
        out = os.path.join(self.tmp, name)
        p = mpirun(world, [TRAIN] + COMMON + list(args) + ["--out", out])
        self.assertEqual(p.returncode, 0, show(p))
        return rows_of(out, self.rank_norms.setdefault(name, []))

    def check_group(self, precision, batch, extra=(), plain=False):
        runs = {}
        for world, accum in GROUPS[batch]:
            name = "%s-%s-%d-%dx%d" % ("plain" if plain else "inv", precision, batch, world, accum)
            args = ["--precision", precision, "--world-batch", str(batch), "--accum", str(accum)] + list(extra)
            runs[(world, accum)] = self.train(name, world, args + (["--plain-ddp"] if plain else []))
        return runs

    def assert_identical(self, runs):
        (first_layout, first), *others = runs.items()
        self.assertEqual(len(first), 6)
        self.assertTrue(any(r["clip_coef"] < 1.0 for r in first), "no step was clipped")
        self.assertEqual([r["step"] for r in first if r["eval_loss"] is not None], [3, 6])
        # Gradient telemetry every 2 steps and at the last: each tensor's norm, in the
        # same bits on every layout (compared with the rest of the row below).
        self.assertEqual([(r["step"], r["telemetry"][0]) for r in first if r["telemetry"]],
                         [(2, "every"), (4, "every"), (6, "every,last")])
        for r in first:  # the step's own gradient, before clipping: together its norm
            if r["telemetry"]:
                total = math.sqrt(math.fsum(x * x for x in r["telemetry"][1]))
                self.assertAlmostEqual(total / r["grad_norm"], 1.0, delta=1e-6, msg=r["step"])
        for layout, rows in others:
            for a, b in zip(first, rows):  # every step: loss, grad norm, clip, held-out loss, checksum
                self.assertEqual(a, b, "W=%d x A=%d against W=%d x A=%d" % (layout + first_layout))

    def test_fp32_every_layout_is_one_run(self):
        for batch in GROUPS:
            runs = self.check_group("fp32", batch)
            self.assert_identical(runs)
            # Each rank's own norm before the reduction: on one rank the step's norm; on
            # more, each rank's own, finite and not the global one.
            for (world, accum), rows in runs.items():
                own = self.rank_norms["inv-fp32-%d-%dx%d" % (batch, world, accum)]
                self.assertEqual(len(own), 6)
                for row, norms in zip(rows, own):
                    self.assertEqual(len(norms), world)
                    if world == 1:
                        self.assertEqual(norms, [row["grad_norm"]])
                    else:
                        self.assertTrue(all(math.isfinite(x) and 0 < x != row["grad_norm"] for x in norms), norms)
                        self.assertEqual(len(set(norms)), world, norms)

    def test_bf16_autocast_every_layout_is_one_run(self):
        for batch in GROUPS:
            self.assert_identical(self.check_group("bf16", batch))

    def test_plain_ddp_differs_across_the_same_layouts(self):
        """The teeth: the same model, data and settings with DDP and gradient accumulation."""
        runs = self.check_group("fp32", 12, plain=True)
        finals = {layout: rows[-1]["checksum"] for layout, rows in runs.items()}
        self.assertEqual(len(set(finals.values())), 3, finals)

    def test_with_a_leaf_the_micro_batch_is_layout(self):
        """--leaf 2: one forward and backward per 2 sequences; micro-batches of 6, 2 and 12
        (and micro-batches of 2 without a leaf, the same math) give one run."""
        base = ["--world-batch", "12"]
        runs = {"W=1 B=12 leaf 2": self.train("leaf-1", 1, base + ["--micro-batch", "12", "--leaf", "2"]),
                "W=2 B=6 leaf 2": self.train("leaf-2", 2, base + ["--micro-batch", "6", "--leaf", "2"]),
                "W=3 B=2": self.train("leaf-3", 3, base + ["--micro-batch", "2"])}
        (_, first), *others = runs.items()
        for name, rows in others:
            self.assertEqual(rows, first, name)
        unsplit = self.train("leaf-none", 1, base + ["--micro-batch", "12"])
        self.assertNotEqual(unsplit[-1]["checksum"], first[-1]["checksum"], "without a leaf B is math")

    def test_resume_on_another_layout_is_the_run_trained_straight_through(self):
        base = ["--world-batch", "12"]
        straight = self.train("straight", 1, base + ["--accum", "6"])
        saved = self.train("saved", 2, base + ["--accum", "3", "--save-at", "3"])
        checkpoint = os.path.join(self.tmp, "saved", "checkpoints", "step_3.pt")
        resumed = self.train("resumed", 3, base + ["--accum", "2", "--resume-from", checkpoint])
        self.assertEqual(saved, straight)
        # The resumed record: the checkpoint's rows, then its own; parameter checksums at
        # the checkpoint's step and after (the ones before it are the saving run's).
        self.assertEqual([r["checksum"] is None for r in resumed], [True, True, False, False, False, False])
        for a, b in zip(resumed, straight):
            self.assertEqual(a, dict(b, checksum=b["checksum"] if a["checksum"] else None), a["step"])
        # A checkpoint of other math is refused, naming what differs.
        p = mpirun(1, [TRAIN] + COMMON + ["--world-batch", "12", "--lr", "2e-2", "--resume-from", checkpoint])
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("the checkpoint was trained with lr 0.01, this run has 0.02", p.stderr, show(p))


# ---------------------------------------------------------------------------------------

# A program over the example's model for the bad inputs train.py cannot produce: run as
# `bad.py MODE` on 2 ranks; prints "applied" after a step and the gradient's hash.
BAD_PROGRAM = r'''
import contextlib, gc, hashlib, os, sys
import torch, torch.distributed as dist
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import train as example
from sweep import invariant as inv
mode = sys.argv[1]
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["MASTER_PORT"], rank=rank, world_size=world)
torch.manual_seed(rank if mode == "seeds" else 0)  # "seeds": each rank its own initial parameters
model = example.TokenShiftLM(32, 16, 0.0)
if mode == "bf16":
    model = model.to(torch.bfloat16)
wrapped = torch.nn.parallel.DistributedDataParallel(model) if mode.startswith("ddp") else model
layout = inv.Layout(8, world, rank, accum=2)
sampler = inv.Sampler(inv.MarkovSource(0, 32, 4), 0, 256, 8, layout)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
try:
    grads = inv.CanonicalGradients(wrapped, layout, tokens_per_step=8 * 8)
    for k in range(layout.accum):
        rows = sampler.batch(0, k)
        with wrapped.no_sync() if mode == "ddp-no-sync" else contextlib.nullcontext():
            total = example.loss_sum(wrapped(rows[:, :-1]), rows[:, 1:])
            if mode == "stray" and rank == 1:
                total.backward(retain_graph=True)  # a backward of its own, outside the accumulator
            grads.backward(total)
    grads.reduce(clip_norm=1.0)
    grads.step(optimizer)
except inv.InvariantError as e:
    if not e.everywhere or rank == 0:
        print("bad.py: error: %s" % e, file=sys.stderr, flush=True)
    # The process group ended while the interpreter is whole, as on the way out below: left
    # to the interpreter's exit, torch 1.13 can abort (exit 134) when the machine is busy.
    grads = wrapped = None
    gc.collect()
    dist.destroy_process_group()
    sys.exit(1)
print("applied rank %d gradient %s" % (rank, hashlib.sha256(grads.flat_gradient().numpy().tobytes()).hexdigest()),
      flush=True)
del grads, wrapped  # DDP before its process group: the other order can abort at exit in torch 1.13
gc.collect()
dist.destroy_process_group()
'''


class BadInput(unittest.TestCase):
    """d. One clear error, a non-zero exit, no step applied."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="invariant_bad_test.")
        cls.program = os.path.join(cls.tmp, "bad.py")
        with open(cls.program, "w", encoding="utf-8") as f:
            f.write(BAD_PROGRAM)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def bad(self, mode):
        return mpirun(2, [self.program, mode, TRAIN])

    def refused(self, p, needle, code=1):
        self.assertEqual(p.returncode, code, show(p))
        self.assertIn(needle, p.stderr, show(p))
        self.assertNotIn("applied", p.stdout, show(p))

    def test_a_global_batch_that_does_not_split(self):
        out = os.path.join(self.tmp, "split")
        p = mpirun(2, [TRAIN] + COMMON + ["--world-batch", "6", "--accum", "2", "--out", out])
        self.refused(p, "train.py: error: the global batch of 6 sequences does not split over 2 ranks x 2 "
                        "accumulation steps: it must be a multiple of 4", code=2)
        self.assertEqual(p.stderr.count("error:"), 1, show(p))  # every rank finds it, one says it
        self.assertFalse(os.path.exists(out), "a refused run wrote its output directory")

    def test_a_stray_backward_on_one_rank(self):
        self.refused(self.bad("stray"), "bad.py: error: rank 1: a gradient reached parameter")

    def test_ddps_all_reduce_left_on(self):
        self.refused(self.bad("ddp"), "bad.py: error: rank 0: DDP's gradient all-reduce is on: run each leaf's "
                                      "forward and backward under model.no_sync()")

    def test_parameters_that_differ_across_ranks(self):
        p = self.bad("seeds")
        self.refused(p, "bad.py: error: the parameters differ across ranks at the start: rank 1 holds other "
                        "values than rank 0")
        self.assertEqual(p.stderr.count("error:"), 1, show(p))

    def test_bf16_parameters(self):
        self.refused(self.bad("bf16"), "rank 0: parameter 'embed.weight' is bfloat16: the canonical accumulator "
                                       "sums fp32 gradients")

    def test_ddp_under_no_sync_is_the_plain_module(self):
        """The adoption path of docs/invariant.md: a DDP model, every backward under no_sync()."""
        plain, ddp = self.bad("module"), self.bad("ddp-no-sync")
        for p in (plain, ddp):
            self.assertEqual(p.returncode, 0, show(p))
        def hashes(p):  # by pattern: mpiexec may hand on the two ranks' lines run together
            return sorted(re.findall(r"applied rank \d+ gradient ([0-9a-f]{64})", p.stdout))

        for p in (plain, ddp):
            self.assertEqual(len(hashes(p)), 2, show(p))  # a line from each rank
        self.assertEqual(len(set(hashes(plain))), 1, show(plain))  # both ranks hold the same gradient
        self.assertEqual(hashes(ddp), hashes(plain))


# ---------------------------------------------------------------------------------------

class UnderSweep(unittest.TestCase):
    """e. The example as a grid's program: sweeps/pytorch-invariance.yaml, trimmed."""

    LAYOUTS = [(1, 6), (2, 3), (3, 2)]  # W x A of one global batch of 12 in micro-batches of 2

    @classmethod
    def setUpClass(cls):
        cls.sweep = os.path.join(cli_util.BIN_DIR, "sweep")
        if not os.access(cls.sweep, os.X_OK):
            raise unittest.SkipTest("%s not found: build sweep, or pass its directory (BIN_DIR)" % cls.sweep)
        import yaml
        cls.tmp = tempfile.mkdtemp(prefix="invariant_sweep_test.")
        with open(os.path.join(ROOT, "sweeps", "pytorch-invariance.yaml"), encoding="utf-8") as f:
            g = yaml.safe_load(f)
        g["program"]["argv"] = ["/usr/bin/python3", TRAIN]
        # COMMON's model and data: 6 steps of a 16-wide model on 8-token sequences, held-out
        # evaluation at steps 3 and 6 (26 of the 256 samples held out, 24 read per evaluation).
        g["base"]["model"].update(vocab=32, seq_len=8, width=16, dropout=0.1)
        g["base"]["data"].update(samples=256, eval_fraction=0.1)
        g["base"]["train"].update(steps=6, lr=1.0e-2, warmup=2, min_lr=1.0e-3, clip_norm=0.3, eval_every=3)
        g["grid"] = {"dist.world_size": [w for w, _ in cls.LAYOUTS]}  # fp32 only
        g["launch"] = {"launcher": "local", "parallel": 1, "slots": 2}
        cls.grid = os.path.join(cls.tmp, "grid.yaml")
        with open(cls.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        cls.dir = os.path.join(cls.tmp, "sweep")
        env = dict(cli_util.program_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cls.env = env
        cls.result = subprocess.run([cls.sweep, "run", cls.grid, "--out", cls.dir], capture_output=True, text=True,
                                    timeout=600, env=env)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cli(self, *args):
        return subprocess.run([self.sweep] + list(args), capture_output=True, text=True, timeout=300, env=self.env)

    def test_every_layout_is_one_bit_identical_class(self):
        p = self.result
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("3 completed, 0 already done, 0 failed", p.stdout, show(p))
        ids, layouts = [], []
        for rid in sorted(os.listdir(os.path.join(self.dir, "runs"))):
            cfg = dict(cli_util.read_run_config(os.path.join(self.dir, "runs", rid, "config.yaml"))[1])
            layouts.append((int(cfg["dist.world_size"]), int(cfg["train.accum"]), int(cfg["train.micro_batch"])))
            ids.append(rid)
        self.assertEqual(sorted(layouts), [(w, a, 2) for w, a in self.LAYOUTS])
        for rid in ids:  # the held-out losses are in the record, where the readers find them
            rows = rows_of(os.path.join(self.dir, "runs", rid))
            self.assertEqual([r["step"] for r in rows if r["eval_loss"] is not None], [3, 6], rid)
            self.assertTrue(any(r["clip_coef"] < 1.0 for r in rows), "no step was clipped")
        q = self.cli("report", self.dir, "--format", "json", "-o", os.path.join(self.tmp, "report.json"))
        self.assertEqual(q.returncode, 0, show(q))
        with open(os.path.join(self.tmp, "report.json"), encoding="utf-8") as f:
            report = json.load(f)
        self.assertEqual([sorted(c["runs"]) for c in report["classes"]], [sorted(ids)], report["classes"])
        sets = report["layout_sets"]
        self.assertEqual(len(sets), 1, sets)
        self.assertEqual(sorted(sets[0]["runs"]), sorted(ids), sets)
        self.assertTrue(sets[0]["identical"], sets[0]["first_difference"])
        for rid in ids[1:]:  # pairwise, evaluations included
            c = self.cli("compare", os.path.join(self.dir, "runs", ids[0]), os.path.join(self.dir, "runs", rid))
            self.assertEqual(c.returncode, 0, show(c))
            self.assertIn("identical bit-for-bit: 6 steps, 7 checksums, 2 evaluations", c.stdout, show(c))


if __name__ == "__main__":
    if len(sys.argv) > 1 and os.path.isdir(sys.argv[1]):  # BIN_DIR (a test name is not a directory)
        cli_util.BIN_DIR = os.path.abspath(sys.argv.pop(1))
    if "--write-vectors" in sys.argv:
        text = json.dumps(make_vectors(), indent=1)
        # One line per list of numbers or words, so the file reads case by case.
        text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
        with open(VECTORS, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print("wrote " + VECTORS)
        sys.exit(0)
    unittest.main()
