"""Each rank's own gradient norm for a plain DistributedDataParallel script.

DDP averages the ranks' gradients inside backward(), so by the time a script can read
.grad every rank holds the same average, and a rank whose data or replica went wrong is
averaged away. RankGradNorms registers a DDP communication hook that measures each bucket
of this rank's gradient before DDP's own all-reduce runs on it, and gathers the ranks'
norms once a step:

    from sweep.ddp import RankGradNorms

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    rank_norms = RankGradNorms(ddp)         # before the first backward()
    ...
    loss.backward()
    run.gradients(step, global_loss, rank_norms=rank_norms.gather())   # every rank

A rank's norm is on the scale of the step's gradient norm: DDP's gradient is the mean of
the ranks' gradients, so rank r's share is its own gradient over the world size, and the
ranks' shares add up to the gradient the optimizer reads. They go to /ranks/grad_norm
(results/SCHEMA.md), where `sweep show` and the report compare the ranks. The hook runs
the all-reduce DDP runs by default (the sum over the ranks divided by the world size), so
the training is bit for bit the same with it; it adds one norm per bucket and, in
gather(), one all_gather of one number a rank. Gradient accumulation under no_sync():
the buckets are measured on the step that synchronises, holding every micro-batch.

Without DDP (one process, or a module that is not wrapped) gather() returns the norm of
the module's own gradient: one rank's share is all of it.
"""

import torch
import torch.distributed as dist

__all__ = ["RankGradNorms"]


class RankGradNorms:
    """A DDP communication hook measuring this rank's gradient before the all-reduce (see
    the module's docstring). `model`: the DistributedDataParallel module, or a plain
    module on one rank. `process_group`: DDP's group (default: the world)."""

    def __init__(self, model, process_group=None):
        self._group = process_group
        self._squares = []  # this step's bucket square sums (float64 tensors), in bucket order
        self._module = None
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            self.world_size = dist.get_world_size(process_group)
            model.register_comm_hook(process_group, self._hook)
        else:
            self.world_size = 1
            self._module = model

    def _hook(self, process_group, bucket):
        buffer = bucket.buffer()
        self._squares.append(torch.linalg.vector_norm(buffer, dtype=torch.float64).square())
        # DDP's default: the mean over the ranks, all-reduced in place.
        group = process_group if process_group is not None else dist.group.WORLD
        buffer.div_(dist.get_world_size(group))
        work = dist.all_reduce(buffer, group=group, async_op=True)
        return work.get_future().then(lambda fut: fut.value()[0])

    def gather(self):
        """Every rank's share of this step's gradient norm, in rank order (a list of
        world_size floats). Collective under DDP: every rank calls it once a step, after
        backward() synchronised the gradients."""
        if self._module is not None:
            grads = [p.grad for p in self._module.parameters() if p.grad is not None]
            if not grads:
                return [0.0]
            squares = torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64).square() for g in grads])
            return [float(squares.sum().sqrt())]
        if not self._squares:
            raise RuntimeError("RankGradNorms.gather(): no bucket was measured since the last gather(); call it "
                               "once a step, after a backward() that synchronised the gradients")
        mine = (torch.stack(self._squares).sum().sqrt() / self.world_size).reshape(1)
        self._squares = []
        shares = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(shares, mine, group=self._group)
        return [float(x) for x in torch.cat(shares).tolist()]
