"""sweep.ddp.RankGradNorms on two real torch.distributed processes (gloo, this host).

Each rank trains a copy of the same small model on its own rows, through DDP with the hook
and, beside it, through DDP without it. Checked on every rank:
- the gradient DDP leaves in .grad is bit for bit the one without the hook;
- gather() gives every rank the same list, and rank r's entry is the norm of the gradient
  rank r computes alone (no DDP, its rows only) over the world size, within float64
  rounding of the bucket sums;
- under no_sync() accumulation (two micro-batches, the first not synchronised) the shares
  are those of the accumulated gradient;
- gather() with no synchronised backward since the last one is an error;
- on one process, without DDP, gather() is the module's gradient norm.
"""

import math
import os
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from sweep.ddp import RankGradNorms  # noqa: E402

WORLD = 2


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))


def rows(rank, micro=0):
    g = torch.Generator().manual_seed(1000 * rank + micro)
    return torch.randn(6, 16, generator=g), torch.randint(0, 8, (6,), generator=g)


def loss_of(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def local_norm(micros, rank):
    """The norm of the gradient rank `rank` computes alone over its micro-batches."""
    model = make_model()
    for m in micros:
        loss_of(model, *rows(rank, m)).backward()
    return math.sqrt(sum(float(p.grad.double().square().sum()) for p in model.parameters()))


def worker(rank, init_file, results):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    out = {}
    # Small buckets, so the model's gradient spans several of them.
    hooked = torch.nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=0.001)
    plain = torch.nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=0.001)
    norms = RankGradNorms(hooked)
    try:
        norms.gather()
        out["early"] = "no error"
    except RuntimeError as e:
        out["early"] = str(e)
    x, y = rows(rank)
    loss_of(hooked, x, y).backward()
    loss_of(plain, x, y).backward()
    out["same_bits"] = all(torch.equal(a.grad, b.grad) for a, b in zip(hooked.parameters(), plain.parameters()))
    out["shares"] = norms.gather()
    out["expected"] = [local_norm([0], r) / WORLD for r in range(WORLD)]
    # Accumulation: micro-batch 1 under no_sync, then micro-batch 2 synchronised.
    for p in hooked.parameters():
        p.grad = None
    with hooked.no_sync():
        loss_of(hooked, *rows(rank, 1)).backward()
    loss_of(hooked, *rows(rank, 2)).backward()
    out["accum_shares"] = norms.gather()
    out["accum_expected"] = [local_norm([1, 2], r) / WORLD for r in range(WORLD)]
    out["buckets"] = len(list(hooked.parameters()))
    results[rank] = out
    dist.destroy_process_group()


class RankNorms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tmp = tempfile.mkdtemp(prefix="rank_grad_norms.")
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(os.path.join(tmp, "rendezvous"), results), nprocs=WORLD, join=True)
        cls.results = dict(results)

    def test_the_hook_leaves_ddps_gradient_bit_for_bit(self):
        for rank in range(WORLD):
            self.assertTrue(self.results[rank]["same_bits"], rank)

    def test_each_share_is_the_ranks_own_gradient_over_the_world(self):
        for key in ("", "accum_"):
            shares = [self.results[r][key + "shares"] for r in range(WORLD)]
            self.assertEqual(shares[0], shares[1], "every rank gets the same list")
            expected = self.results[0][key + "expected"]
            self.assertNotAlmostEqual(expected[0], expected[1], places=3)  # the ranks' rows differ
            for got, want in zip(shares[0], expected):
                self.assertAlmostEqual(got, want, delta=1e-6 * want, msg=key + "shares")

    def test_gather_without_a_synchronised_backward_is_an_error(self):
        self.assertIn("no bucket was measured since the last gather()", self.results[0]["early"])

    def test_one_process_without_ddp_is_the_modules_norm(self):
        model = make_model()
        loss_of(model, *rows(0)).backward()
        (share,) = RankGradNorms(model).gather()
        self.assertAlmostEqual(share, local_norm([0], 0), delta=1e-9)


if __name__ == "__main__":
    unittest.main(verbosity=2)
