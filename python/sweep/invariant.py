"""Layout-free training steps for PyTorch scripts: sweep's promise under torch.distributed.

The promise (docs/design.md, "The promise"): the same seed and global batch give
bit-identical losses, gradient norms and parameters however the batch is laid out over
ranks (W), accumulation steps (A) and, with a leaf size, micro-batches (B). Ordinary DDP
breaks it twice: its bucketed all-reduce sums the ranks' gradients in an order that depends
on W, and gradient accumulation sums micro-batches in arrival order. This module replaces
both with the canonical reduction of sweep's C++ trainer (docs/invariant.md):

Leaves. A step's global batch of G sequences is cut, in global order, into N leaves: a leaf
is a micro-batch (N = W x A), or, with a leaf size L, L sequences (N = G / L; each leaf then
runs its own forward and backward, so B becomes layout). Rank r holds leaves
[r N/W, (r+1) N/W): its micro-batch k is global micro-batch r A + k.

Sampling (the one scheme, as trainer/data/data_source.h): a step's samples are a function of
(seed, step, global micro-batch, row) only. Row b of global micro-batch j of 0-based step s
is global position g = (s M + j) B + b, M = W x A micro-batches per step; since ranks hold
contiguous micro-batches, g = s G + (the sequence's place in the step's global batch), the
same number on every layout. Epoch e = g // samples visits the samples in the permutation
epoch_permutation(seed, e, samples) (a Fisher-Yates shuffle driven by splitmix64), so g is
sample epoch_permutation(seed, e, samples)[g % samples]. Held-out sequences are read in one
fixed order without shuffling: row b of global micro-batch j of evaluation batch e is
sequence held_out_first + (e M + j) B + b. Anything random inside a leaf (dropout) is drawn
from leaf_generator(seed, step, leaf), a function of the global leaf index.

The tree. The sum of N leaf gradients is tree(lo, hi) = tree(lo, lo+P) + tree(lo+P, hi), P
the largest power of two < hi - lo, in fp32 (trainer/numerics/canonical_reduce.h; the
functions and classes here mirror it one for one, and tests/data/canonical_tree_vectors.json
checks both). A rank folds its leaves, as each leaf's backward ends, into the canonical cover
of its range (NodeAccumulator): one subtree when the range is aligned, at most about
2 log2 N otherwise (W=2 x A=3: leaves [0,2) and [2,3) of 6). CanonicalGradients.reduce()
exchanges the subtree sums with one all-to-all (each rank gets one shard of every rank's
subtrees), completes the tree over them in canonical order (tree_over_nodes) and gathers the
shards with a second all-to-all, so every rank holds the bits one process would get by
running the whole global batch. Loss sums per leaf travel with the first exchange and are
added by the same tree in float64 (canonical_sum), then divided once by the global token
count. The gradient norm and the clip are computed from the reduced flat buffer, the same
on every rank and every layout.

Checks, each one InvariantError naming the cause (and the rank) before the step is applied:
a global batch that does not split over the layout; a gradient that reached the parameters
outside CanonicalGradients.backward (a stray backward(), a gradient assigned by hand, DDP's
own all-reduce left on); parameters that differ across ranks at the start; parameters (and
so gradients) that are not fp32.
"""

import hashlib
import math
import weakref
from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "BLOCK",
    "CanonicalGradients",
    "InvariantError",
    "Layout",
    "MarkovSource",
    "NodeAccumulator",
    "Sampler",
    "StepResult",
    "TreeAccumulator",
    "TreeNode",
    "canonical_cover",
    "canonical_siblings",
    "canonical_split",
    "canonical_sum",
    "epoch_permutation",
    "leaf_generator",
    "mix64",
    "mix_keys",
    "tree_over_nodes",
]

#: Elements per block of the gradient norm: each block's sum of squares is one reduction,
#: and the block sums are added by the canonical tree (the C++ norm's block size too).
BLOCK = 4096


class InvariantError(RuntimeError):
    """A broken precondition of the promise. `rank` is the rank that found it (None when
    every rank finds the same, e.g. a layout that does not split the batch), and
    `everywhere` says every rank raised it, so a script reports it once."""

    def __init__(self, message, rank=None, everywhere=False):
        super().__init__(message if rank is None else "rank %d: %s" % (rank, message))
        self.rank = rank
        self.everywhere = everywhere


# ---------------------------------------------------------------------------------------
# The canonical tree (trainer/numerics/canonical_reduce.{h,cpp}, trainer/numerics/arith.h)


def canonical_split(count):
    """The largest power of two below `count` (>= 2): where tree(lo, lo + count) splits."""
    p = 1
    while p * 2 < count:
        p *= 2
    return p


class TreeNode(NamedTuple):
    """Subtree of the canonical tree: leaves [lo, lo + count)."""

    lo: int
    count: int

    @property
    def end(self):
        return self.lo + self.count


class TreeAccumulator:
    """Sums equal-length fp32 vectors pushed in leaf order with the canonical tree, holding
    O(log M) partial sums (a binary-counter stack): what one process running the whole
    global batch computes."""

    def __init__(self):
        self._stack = []  # [leaves, sum]: power-of-two subtrees of strictly decreasing size

    def push(self, g):
        """Adds leaf number count() (a copy of `g`)."""
        self._stack.append([1, g.detach().clone()])
        # Merge equal-sized neighbours: each completed power-of-two block becomes one subtree.
        while len(self._stack) >= 2 and self._stack[-2][0] == self._stack[-1][0]:
            leaves, right = self._stack.pop()
            self._stack[-1][0] += leaves
            self._stack[-1][1].add_(right)

    def count(self):
        """Leaves pushed so far."""
        return sum(leaves for leaves, _ in self._stack)

    def finish(self):
        """The canonical tree sum of all leaves (None when none were pushed); resets.
        Folding the stack right to left is tree(lo,hi) = tree(lo,lo+P) + tree(lo+P,hi)."""
        if not self._stack:
            return None
        out = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            out = torch.add(left, out, out=out)
        self._stack = []
        return out


def canonical_sum(values):
    """The canonical tree sum of scalars (float64; 0.0 for none): per-leaf loss sums."""
    values = [float(v) for v in values]

    def tree(lo, hi):
        if hi - lo == 1:
            return values[lo]
        p = canonical_split(hi - lo)
        return tree(lo, lo + p) + tree(lo + p, hi)

    return tree(0, len(values)) if values else 0.0


def canonical_cover(leaves, a, b):
    """The fewest subtrees of the canonical tree over `leaves` leaves that together are the
    range [a, b), in leaf order: the tree's nodes inside the range whose parents are not."""
    if a < 0 or b > leaves or a >= b:
        raise ValueError("canonical_cover: range [%d, %d) is empty or outside the %d leaves" % (a, b, leaves))
    out = []

    def cover(node):
        if node.end <= a or node.lo >= b:
            return
        if node.lo >= a and node.end <= b:
            out.append(node)
            return
        p = canonical_split(node.count)
        cover(TreeNode(node.lo, p))
        cover(TreeNode(node.lo + p, node.count - p))

    cover(TreeNode(0, leaves))
    return out


def canonical_siblings(leaves, left, right):
    """Whether adjacent `left` and `right` are the two children of one node of the canonical
    tree over `leaves` leaves."""
    if left.end != right.lo or left.count < 1 or right.count < 1:
        return False
    node = TreeNode(0, leaves)
    parent = TreeNode(left.lo, left.count + right.count)
    while node.count > 1 and node.lo <= parent.lo and node.end >= parent.end:
        p = canonical_split(node.count)
        if node == parent:
            return p == left.count
        node = TreeNode(node.lo, p) if parent.lo < node.lo + p else TreeNode(node.lo + p, node.count - p)
    return False


class NodeAccumulator:
    """Sums of canonical subtrees pushed in leaf order (the first anywhere, each next one
    starting where the last ended), merged as (left + right) whenever the top two are
    siblings. What it holds is then the canonical cover of the pushed range, each node's
    sum with the bits of the canonical tree over that node's leaves, however the pushes cut
    the range. Unlike the C++ class it keeps the tensor it is given instead of copying it;
    buffer() hands out a recycled one to fill."""

    def __init__(self, leaves, size, device="cpu"):
        self._leaves, self._size, self._device = leaves, size, device
        self._held = []  # [TreeNode, sum]
        self._spare = []

    def buffer(self):
        """An fp32 vector of `size` elements to fill and push (recycled: any content)."""
        if self._spare:
            return self._spare.pop()
        return torch.zeros(self._size, dtype=torch.float32, device=self._device)

    def push(self, node, total):
        """Adds `total`, the sum of subtree `node`; the accumulator keeps `total` and adds
        into it. Raises ValueError when the node does not start where the last one ended."""
        if self._held and self._held[-1][0].end != node.lo:
            last = self._held[-1][0]
            raise ValueError("NodeAccumulator: leaves [%d, %d) do not follow leaf %d"
                             % (node.lo, node.end, last.end - 1))
        self._held.append([node, total])
        while len(self._held) >= 2 and canonical_siblings(self._leaves, self._held[-2][0], self._held[-1][0]):
            right_node, right = self._held.pop()
            left = self._held[-1]
            left[1].add_(right)
            left[0] = TreeNode(left[0].lo, left[0].count + right_node.count)
            self._spare.append(right)

    def nodes(self):
        """The nodes held, in leaf order."""
        return [node for node, _ in self._held]

    def sums(self):
        """Their sums, in the same order."""
        return [total for _, total in self._held]

    def clear(self):
        """Forgets everything (the buffers are kept for buffer())."""
        self._spare.extend(total for _, total in self._held)
        self._held = []


def tree_over_nodes(nodes, pieces, leaves, out=None, scratch=None):
    """The canonical tree sum over `pieces`, the sums of subtrees `nodes` that partition
    leaves [0, leaves) in order: bit-identical to TreeAccumulator over all the leaves.
    `scratch[i]` is a buffer that node i's range may be summed into (a piece may be its own
    scratch: it is overwritten only after it is read); None allocates. Returns `out` when
    given, else a piece or a scratch buffer."""
    nodes = [TreeNode(*n) for n in nodes]
    scratch = list(scratch) if scratch is not None else [None] * len(nodes)
    first = [0]

    def tree(lo, count, dst):
        i = first[0]
        if i >= len(nodes) or nodes[i].lo != lo or nodes[i].count > count:
            raise ValueError("tree_over_nodes: the nodes are not canonical subtrees partitioning the leaves")
        if nodes[i].count == count:
            first[0] += 1
            if dst is not None and dst is not pieces[i]:
                dst.copy_(pieces[i])
                return dst
            return pieces[i]
        p = canonical_split(count)
        left = tree(lo, p, None)
        right = tree(lo + p, count - p, None)
        if dst is None:
            if scratch[i] is None:
                scratch[i] = torch.empty_like(left)
            dst = scratch[i]
        return torch.add(left, right, out=dst)

    result = tree(0, leaves, out)
    if first[0] != len(nodes):
        raise ValueError("tree_over_nodes: the nodes are not canonical subtrees partitioning the leaves")
    return result


def _tree_sum(values):
    """The canonical tree sum of a 1-D tensor, in O(log n) tensor operations: the binary
    decomposition of n (as TreeAccumulator's stack), each power-of-two part summed pairwise
    level by level, the parts folded right to left."""
    parts, lo, n = [], 0, values.numel()
    while lo < n:
        size = 1 << ((n - lo).bit_length() - 1)
        part = values[lo:lo + size]
        while part.numel() > 1:
            part = part[0::2] + part[1::2]
        parts.append(part)
        lo += size
    total = parts[-1]
    for part in reversed(parts[:-1]):
        total = part + total
    return total[0]


def _square_sum_by_blocks(flat):
    """The square sum of a 1-D fp32 tensor, free of the layout and the thread count: the
    norm of each BLOCK of its elements (one fp32 reduction per block, the last block the
    remainder), their squares in float64 added by the canonical tree; a 0-dim tensor."""
    whole = flat.numel() // BLOCK * BLOCK
    parts = []
    if whole:
        parts.append(torch.linalg.vector_norm(flat[:whole].view(-1, BLOCK), dim=1))
    if whole < flat.numel():
        parts.append(torch.linalg.vector_norm(flat[whole:]).reshape(1))
    blocks = parts[0] if len(parts) == 1 else torch.cat(parts)
    return _tree_sum(blocks.double().square())


def _py_tree_sum(values):
    """_tree_sum on a list of Python floats (float64): the same additions in the same order,
    so the same bits."""
    parts, lo, n = [], 0, len(values)
    while lo < n:
        size = 1 << ((n - lo).bit_length() - 1)
        part = values[lo:lo + size]
        while len(part) > 1:
            part = [part[i] + part[i + 1] for i in range(0, len(part), 2)]
        parts.append(part[0])
        lo += size
    total = parts[-1]
    for part in reversed(parts[:-1]):
        total = part + total
    return total


# tensor_grad_norms measures a gradient of at most this many blocks in one call.
_ONE_CALL_BLOCKS = 256


def tensor_grad_norms(tensors):
    """Each tensor's L2 norm as a list of floats, with the same bits whatever the layout and
    the thread count, as CanonicalGradients.grad_norm(): the norm of each BLOCK of the
    tensor's elements (one fp32 reduction per block, the last block the remainder), their
    squares in float64 added by the canonical tree, the square root. None (a parameter no
    gradient reached) counts 0. One copy from the device for all of them.

    The bits are _square_sum_by_blocks' (each block's norm by the same reduction, the
    float64 squares and the tree in Python floats, which are float64), in few tensor
    operations: a script calls this every step, and on a small model each operation's
    dispatch costs more than its arithmetic. A host gradient of at most _ONE_CALL_BLOCKS
    blocks is measured in one torch._foreach_norm over its blocks (on the host it reduces
    each block as linalg.vector_norm does, which test_gradient_telemetry.py holds to the
    bits); otherwise each tensor's whole blocks are one row reduction and the remainders
    one more call."""
    flats, shapes = [], []  # the measured tensors, flat, and each one's (whole blocks, has a remainder)
    plan = []  # per tensor: None (counts 0) or its place in flats
    for t in tensors:
        if t is None or t.numel() == 0:
            plan.append(None)
            continue
        flat = (t.detach() if t.requires_grad else t).reshape(-1)
        flat = flat if flat.dtype == torch.float32 else flat.float()
        plan.append(len(flats))
        flats.append(flat)
        shapes.append((flat.numel() // BLOCK, flat.numel() % BLOCK != 0))
    if not flats:
        return [0.0] * len(plan)
    blocks = sum(whole + rest for whole, rest in shapes)
    if blocks <= _ONE_CALL_BLOCKS and all(f.is_cpu for f in flats) and hasattr(torch, "_foreach_norm"):
        pieces = []  # every block of every tensor, in order
        for f, (whole, rest) in zip(flats, shapes):
            pieces.extend(f[i * BLOCK:(i + 1) * BLOCK] for i in range(whole + rest))
        values = torch.stack(torch._foreach_norm(pieces)).tolist()
    else:
        parts = []
        for f, (whole, rest) in zip(flats, shapes):
            if whole:
                parts.append(torch.linalg.vector_norm(f[:whole * BLOCK].view(-1, BLOCK), dim=1))
            if rest:
                parts.append(torch.linalg.vector_norm(f[whole * BLOCK:]).reshape(1))
        values = torch.cat([p.to(parts[0].device) for p in parts]).tolist()
    norms, at = [], 0  # each measured tensor's norm, from its blocks' values in order
    for whole, rest in shapes:
        n = whole + rest
        # One block: the square root of its square (exact, an fp32 value in float64) is itself.
        norms.append(abs(values[at]) if n == 1 else math.sqrt(_py_tree_sum([b * b for b in values[at:at + n]])))
        at += n
    return [0.0 if k is None else norms[k] for k in plan]


# ---------------------------------------------------------------------------------------
# Data: the layout, the seeded source and the sampler (trainer/data/)

_MASK = (1 << 64) - 1
_U64 = np.uint64


def mix64(x):
    """splitmix64 (trainer/data/synthetic_data.cpp): the mixer every seeded choice uses."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def mix_keys(seed, a, b=0, c=0):
    """A seed combined with counters into one well-mixed 64-bit value."""
    return mix64(mix64(mix64(mix64(seed & _MASK) ^ (a & _MASK)) ^ (b & _MASK)) ^ (c & _MASK))


def _mix64_array(x):
    """mix64 over a numpy uint64 array (its arithmetic wraps modulo 2^64, as in C++)."""
    with np.errstate(over="ignore"):
        x = x + _U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _mix_keys_array(seed, a, b, c):
    """mix_keys with each of a, b, c a Python int or a numpy uint64 array."""
    x = np.asarray(mix64(seed & _MASK), dtype=_U64)
    for key in (a, b, c):
        x = _mix64_array(x ^ np.asarray(key, dtype=_U64))
    return x


def epoch_permutation(seed, epoch, samples):
    """The per-epoch shuffle of `samples` indices from (seed, epoch), the C++ Fisher-Yates
    permutation driven by mix_keys: the same on every rank and every run."""
    perm = list(range(samples))
    if samples > 1:
        i = np.arange(samples - 1, 0, -1, dtype=_U64)
        js = (_mix_keys_array(seed, 3, epoch, i) % (i + _U64(1))).tolist()
        for i, j in zip(range(samples - 1, 0, -1), js):
            perm[i], perm[j] = perm[j], perm[i]
    return perm


class MarkovSource:
    """The synthetic token source of sweep-train (trainer/data/synthetic_data.cpp), bit for
    bit: each token has `branching` distinct successors drawn from (seed, vocab, branching);
    sequence s walks them with choices drawn from (seed, s). The best loss is ln(branching)."""

    def __init__(self, seed, vocab, branching):
        if not 1 <= branching <= vocab:
            raise ValueError("MarkovSource: branching %d needs 1 <= branching <= vocab %d" % (branching, vocab))
        self.seed, self.vocab, self.branching = seed, vocab, branching
        successors = []
        for t in range(vocab):
            succ = []
            for k in range(branching):
                attempt = 0
                while True:  # a repeated successor would be twice as likely: redraw it
                    s = mix_keys(seed, 1, t, k | (attempt << 32)) % vocab
                    if s not in succ:
                        succ.append(s)
                        break
                    attempt += 1
            successors.extend(succ)
        self._successors = np.array(successors, dtype=np.int64)

    def entropy_floor(self):
        return math.log(self.branching)

    def sequences(self, samples, length):
        """Sequences `samples` (integers) of `length` tokens: an int64 array [len, length]."""
        keys = _mix_keys_array(self.seed, 2, np.asarray(samples, dtype=_U64), 0)
        out = np.empty((keys.size, length), dtype=np.int64)
        if length == 0:
            return out
        out[:, 0] = (_mix64_array(keys) % _U64(self.vocab)).astype(np.int64)
        steps = _mix64_array(keys[:, None] + np.arange(1, length, dtype=_U64)[None, :])
        choice = (steps % _U64(self.branching)).astype(np.int64)
        for i in range(1, length):
            out[:, i] = self._successors[out[:, i - 1] * self.branching + choice[:, i - 1]]
        return out


class Layout:
    """How one step's global batch of `world_batch` sequences is laid out: `world_size`
    ranks x `accum` micro-batches of `micro_batch` sequences (give accum or micro_batch or
    both), and the leaves of the canonical tree: `leaf` sequences each, or, with leaf 0, one
    per micro-batch. Raises InvariantError (on every rank alike) when the batch does not
    split over the layout."""

    def __init__(self, world_batch, world_size=1, rank=0, accum=None, micro_batch=None, leaf=0):
        def refuse(message):
            raise InvariantError(message, everywhere=True)

        for name, value in (("world_batch", world_batch), ("world_size", world_size), ("accum", accum),
                            ("micro_batch", micro_batch)):
            if value is not None and value < 1:
                refuse("%s %d: it must be at least 1" % (name, value))
        if not 0 <= rank < world_size:
            refuse("rank %d is outside the world of %d ranks" % (rank, world_size))
        if accum is None and micro_batch is None:
            accum = 1
        if micro_batch is None:
            if world_batch % (world_size * accum):
                refuse("the global batch of %d sequences does not split over %d ranks x %d accumulation steps: "
                       "it must be a multiple of %d" % (world_batch, world_size, accum, world_size * accum))
            micro_batch = world_batch // (world_size * accum)
        elif accum is None:
            if world_batch % (world_size * micro_batch):
                refuse("the global batch of %d sequences does not split over %d ranks x micro-batches of %d: "
                       "it must be a multiple of %d" % (world_batch, world_size, micro_batch, world_size * micro_batch))
            accum = world_batch // (world_size * micro_batch)
        elif world_size * accum * micro_batch != world_batch:
            refuse("%d ranks x %d accumulation steps x micro-batches of %d are %d sequences, not the global batch "
                   "of %d" % (world_size, accum, micro_batch, world_size * accum * micro_batch, world_batch))
        if leaf < 0 or (leaf and micro_batch % leaf):
            refuse("a leaf of %d sequences does not divide the micro-batch of %d" % (leaf, micro_batch))
        self.world_batch, self.world_size, self.rank = world_batch, world_size, rank
        self.accum, self.micro_batch = accum, micro_batch
        self.split = leaf > 0  # each leaf runs its own forward and backward
        self.leaf = leaf if leaf else micro_batch
        self.micro_batches = world_size * accum  # M
        self.leaves = world_batch // self.leaf  # N
        self.leaves_per_micro_batch = micro_batch // self.leaf
        self.rank_leaves = self.leaves // world_size
        self.first_leaf = rank * self.rank_leaves

    def global_micro_batch(self, k):
        """The global index j of this rank's micro-batch k."""
        return self.rank * self.accum + k

    def leaves_of(self, rows):
        """A micro-batch's rows cut into its leaves (one piece without a leaf size)."""
        return rows.split(self.leaf) if self.split else (rows,)

    def cover(self, rank):
        """The canonical cover of `rank`'s leaves."""
        return canonical_cover(self.leaves, rank * self.rank_leaves, (rank + 1) * self.rank_leaves)

    def describe(self):
        leaf = ", leaves of %d" % self.leaf if self.split else ""
        return "%d ranks x %d micro-batches of %d%s" % (self.world_size, self.accum, self.micro_batch, leaf)


class Sampler:
    """This rank's token rows under the scheme of the module docstring: `source` is any
    object with sequences(samples, length) -> int64 array (MarkovSource); each row holds
    seq_len + 1 tokens (inputs and shifted targets)."""

    def __init__(self, source, seed, samples, seq_len, layout, held_out_first=None):
        self.source, self.seed, self.samples, self.seq_len, self.layout = source, seed, samples, seq_len, layout
        self.held_out_first = samples if held_out_first is None else held_out_first
        self._perms = {}  # the two most recent epochs' permutations

    def _permutation(self, epoch):
        if epoch not in self._perms:
            if len(self._perms) >= 2:
                del self._perms[min(self._perms)]
            self._perms[epoch] = epoch_permutation(self.seed, epoch, self.samples)
        return self._perms[epoch]

    def _positions(self, batch, k):
        lay = self.layout
        first = (batch * lay.micro_batches + lay.global_micro_batch(k)) * lay.micro_batch
        return range(first, first + lay.micro_batch)

    def batch(self, step, k):
        """Rows of this rank's micro-batch k of 0-based `step`: [micro_batch, seq_len + 1]."""
        samples = [self._permutation(g // self.samples)[g % self.samples] for g in self._positions(step, k)]
        return torch.from_numpy(self.source.sequences(samples, self.seq_len + 1))

    def held_out(self, batch, k):
        """Rows of this rank's micro-batch k of held-out evaluation batch `batch` (0-based)."""
        samples = [self.held_out_first + g for g in self._positions(batch, k)]
        return torch.from_numpy(self.source.sequences(samples, self.seq_len + 1))


def leaf_generator(seed, step, leaf, device="cpu"):
    """A torch.Generator for what is random inside global leaf `leaf` of 0-based `step`
    (dropout masks): a function of (seed, step, leaf), so the same on every layout."""
    g = torch.Generator(device=device)
    g.manual_seed(mix_keys(seed, 4, step, leaf))
    return g


# ---------------------------------------------------------------------------------------
# The canonical gradient accumulator and all-reduce


class StepResult(NamedTuple):
    loss: float  # the canonical sum of the leaves' loss sums over the global token count
    grad_norm: float  # of the reduced gradient, before clipping
    clip_coef: float  # what the gradient was multiplied by (1.0: not clipped)


def _hash_of(flat):
    """A 63-bit hash of an fp32 tensor's bytes (blake2b), for comparing replicas."""
    digest = hashlib.blake2b(flat.detach().cpu().numpy().tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class CanonicalGradients:
    """Folds each leaf's parameter gradients into the canonical tree and reduces them across
    ranks in canonical order, so every rank ends the step with the gradient, loss and norm
    one process would compute over the whole global batch.

    `model` is the nn.Module (or a DDP wrapper, whose all-reduce must then be off: every
    backward under model.no_sync()); its trainable parameters, all fp32 on one device, are
    the flat gradient in named_parameters() order. `tokens_per_step` is the global token
    count each leaf's loss sum is divided by. `group` is the torch.distributed group of the
    layout's ranks (None: the default group; not used on one rank).

    Per step: backward(loss_sum) once per leaf of this rank, in leaf order; reduce() (p.grad
    then holds the reduced, clipped gradient); step(optimizer). The constructor compares a
    hash of the parameters across ranks.
    """

    def __init__(self, model, layout, tokens_per_step, group=None):
        self.layout, self.tokens, self.group = layout, tokens_per_step, group
        self.rank = layout.rank
        module = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
        self._ddp = model if module is not model else None
        self._named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not self._named:
            raise InvariantError("the model has no trainable parameters", self.rank)
        for name, p in self._named:
            if p.dtype != torch.float32:
                raise InvariantError("parameter '%s' is %s: the canonical accumulator sums fp32 gradients; keep the "
                                     "parameters in fp32 and compute in bf16 under torch.autocast"
                                     % (name, str(p.dtype).replace("torch.", "")), self.rank)
        self.device = self._named[0][1].device
        for name, p in self._named:
            if p.device != self.device:
                raise InvariantError("parameter '%s' is on %s, the first on %s: the flat gradient lives on one device"
                                     % (name, p.device, self.device), self.rank)
        if layout.world_size > 1:
            if not dist.is_initialized():
                raise InvariantError("a layout of %d ranks needs torch.distributed initialised" % layout.world_size,
                                     self.rank)
            if (dist.get_world_size(group), dist.get_rank(group)) != (layout.world_size, layout.rank):
                raise InvariantError("the layout says rank %d of %d, torch.distributed rank %d of %d"
                                     % (layout.rank, layout.world_size, dist.get_rank(group),
                                        dist.get_world_size(group)), self.rank)
        self.numel = sum(p.numel() for _, p in self._named)
        # Padded to whole norm blocks and equal shards; the padding holds zeros (+0 or -0).
        unit = BLOCK * layout.world_size
        self._padded = -(-self.numel // unit) * unit
        self._shard = self._padded // layout.world_size
        self._acc = NodeAccumulator(layout.leaves, self._padded, self.device)
        self._result = torch.zeros(self._padded, dtype=torch.float32, device=self.device)
        self._leaf_views = {}  # id of a leaf buffer -> (the buffer, its per-parameter views)
        self._views = self._views_of(self._result)
        self._covers = [layout.cover(r) for r in range(layout.world_size)]
        self._widest = max(len(c) for c in self._covers)
        # The exchange rows: every subtree's shard, then the rank's leaf loss sums and the
        # norm of its own gradient (float64 as pairs of float32 words: the all-to-all copies
        # bits, it adds nothing).
        row = self._widest * self._shard + 2 * (layout.rank_leaves + 1)
        self._send = self._recv = self._gather = None
        if layout.world_size > 1:
            self._send = torch.zeros(layout.world_size, row, dtype=torch.float32, device=self.device)
            self._recv = torch.empty_like(self._send)
            self._gather = torch.empty(layout.world_size, self._shard, dtype=torch.float32, device=self.device)
        self._folded, self._loss_sums = 0, []
        self._in_backward, self._stray, self._reduced = False, None, False
        #: Each rank's own gradient norm at the last reduce(), before the reduction: the norm
        #: of the sum of its subtrees (its micro-batches), on the scale of grad_norm.
        self.rank_grad_norms = []
        # A hook on each parameter's gradient accumulator sees every gradient that lands in
        # .grad, so one that lands outside backward() is caught, whatever made it.
        # (The hooks hold the accumulator weakly: a dropped one does not live on in them.)
        self._grad_nodes = []
        this = weakref.ref(self)

        def hook(i):
            def accumulated(grad_inputs, grad_outputs):
                acc = this()
                if acc is not None:
                    acc._accumulated(i)
            return accumulated

        with torch.enable_grad():
            for i, (_, p) in enumerate(self._named):
                node = p.expand_as(p).grad_fn.next_functions[0][0]
                node.register_hook(hook(i))
                self._grad_nodes.append(node)
        self.check_replicas()

    def _views_of(self, flat):
        """Per-parameter views of a flat buffer, made once per buffer (the pool is small)."""
        if id(flat) not in self._leaf_views:
            views, offset = [], 0
            for _, p in self._named:
                views.append(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            self._leaf_views[id(flat)] = (flat, views)
        return self._leaf_views[id(flat)][1]

    # -- checks

    def _accumulated(self, i):
        if not self._in_backward and self._stray is None:
            self._stray = self._named[i][0]

    def _check_grads(self):
        """Every .grad is None or the reduced view this accumulator put there, and no
        gradient arrived outside backward() since the last check."""
        if self._stray is not None:
            name, self._stray = self._stray, None
            raise InvariantError("a gradient reached parameter '%s' outside CanonicalGradients.backward (a stray "
                                 "backward(), or DDP's all-reduce): every leaf's backward must go through it" % name,
                                 self.rank)
        for (name, p), view in zip(self._named, self._views):
            if p.grad is not None and p.grad is not view:
                raise InvariantError("parameter '%s' holds a gradient CanonicalGradients did not put there (a "
                                     "backward() outside it, or a .grad set by hand)" % name, self.rank)

    def check_replicas(self):
        """Compares a hash of the parameters across ranks; raises InvariantError on every
        rank, naming the ranks that differ from rank 0, when they are not all equal."""
        if self.layout.world_size == 1:
            return
        flat = torch.cat([p.detach().reshape(-1) for _, p in self._named])
        mine = torch.tensor([_hash_of(flat)], dtype=torch.int64, device=self.device)
        hashes = [torch.empty_like(mine) for _ in range(self.layout.world_size)]
        dist.all_gather(hashes, mine, group=self.group)
        hashes = [int(h.item()) for h in hashes]
        differ = [r for r, h in enumerate(hashes) if h != hashes[0]]
        if differ:
            raise InvariantError("the parameters differ across ranks at the start: rank%s %s hold%s other values than "
                                 "rank 0 (hashes %s); seed the initialisation alike on every rank or broadcast rank "
                                 "0's parameters" % ("s" if len(differ) > 1 else "", ", ".join(map(str, differ)),
                                                      "" if len(differ) > 1 else "s",
                                                      ", ".join("%016x" % h for h in hashes)), everywhere=True)

    # -- the step

    def backward(self, loss_sum):
        """Runs the backward of this rank's next leaf, whose token-loss sum is `loss_sum` (a
        0-dim tensor), divided by the global token count, and folds the leaf's gradients
        into the rank's subtrees."""
        lay = self.layout
        if self._folded == lay.rank_leaves:
            raise InvariantError("a leaf more than this rank's share of %d (%s): call reduce() after the last one"
                                 % (lay.rank_leaves, lay.describe()), self.rank)
        if self._ddp is not None and self._ddp.require_backward_grad_sync:
            raise InvariantError("DDP's gradient all-reduce is on: run each leaf's forward and backward under "
                                 "model.no_sync(), or do not wrap the model in DDP (CanonicalGradients reduces)",
                                 self.rank)
        self._check_grads()
        self._reduced = False  # a new step's gradient begins: the last reduction is gone
        # Autograd adds a gradient into a .grad that exists, in place; -0 + g is g for every
        # g (+0 + -0 would be +0), so the leaf's gradient lands in its buffer as it is,
        # without a copy, and a parameter the leaf does not reach contributes -0.
        buf = self._acc.buffer()
        buf.fill_(-0.0)
        for (_, p), view in zip(self._named, self._views_of(buf)):
            p.grad = view
        self._in_backward = True
        try:
            (loss_sum / self.tokens).backward()
        finally:
            self._in_backward = False
            for _, p in self._named:
                p.grad = None
        self._acc.push(TreeNode(lay.first_leaf + self._folded, 1), buf)
        self._loss_sums.append(loss_sum.detach().reshape(()))
        self._folded += 1

    def reduce(self, clip_norm=0.0, before_clip=None):
        """Completes the step's gradient across ranks in canonical order, clips it when
        clip_norm > 0 and its norm is above (coefficient clip_norm / (norm + 1e-6)), and
        points every p.grad at it. Returns StepResult; the same bits on every rank.
        `before_clip`, when given, is called with the StepResult before the gradient is
        clipped (clip_coef 1.0), when tensor_grad_norms() and rank_grad_norms read the
        gradient as it was reduced: sweep's run.gradients() takes its telemetry there."""
        lay = self.layout
        self._check_grads()
        if self._folded != lay.rank_leaves:
            raise InvariantError("%d leaves were folded, this rank's share of the step is %d (%s)"
                                 % (self._folded, lay.rank_leaves, lay.describe()), self.rank)
        if self._acc.nodes() != self._covers[self.rank]:
            raise InvariantError("the leaves folded into %s, not the canonical cover %s"
                                 % (self._acc.nodes(), self._covers[self.rank]), self.rank)
        losses = torch.stack(self._loss_sums).to(torch.float64)
        if lay.world_size == 1:
            self._result.copy_(self._acc.sums()[0])
            leaf_losses = losses.tolist()
        else:
            leaf_losses, self.rank_grad_norms = self._exchange(losses)
        self._acc.clear()
        self._folded, self._loss_sums = 0, []
        loss = canonical_sum(leaf_losses) / self.tokens
        grad_norm = self.grad_norm()
        if lay.world_size == 1:
            self.rank_grad_norms = [grad_norm]
        if before_clip is not None:
            before_clip(StepResult(loss, grad_norm, 1.0))
        clip_coef = 1.0
        if clip_norm > 0 and grad_norm > clip_norm:
            clip_coef = clip_norm / (grad_norm + 1e-6)
            self._result.mul_(clip_coef)
        for (_, p), view in zip(self._named, self._views):
            p.grad = view
        self._reduced = True
        return StepResult(loss, grad_norm, clip_coef)

    def _exchange(self, losses):
        """The canonical all-reduce: rank r receives shard r of every rank's subtree sums,
        sums them by tree_over_nodes, and the shards are gathered. Returns every rank's leaf
        loss sums in leaf order and every rank's own gradient norm."""
        lay, s, widest = self.layout, self._shard, self._widest
        W = lay.world_size
        sums = self._acc.sums()
        for k, total in enumerate(sums):
            self._send[:, k * s:(k + 1) * s].copy_(total.view(W, s))
        own = sums[0] if len(sums) == 1 else torch.stack(sums).sum(0)
        words = torch.cat([losses, _square_sum_by_blocks(own).sqrt().reshape(1)])
        self._send[:, widest * s:].copy_(words.view(torch.float32).expand(W, -1))
        dist.all_to_all_single(self._recv, self._send, group=self.group)
        nodes = [node for cover in self._covers for node in cover]
        pieces = [self._recv[r, k * s:(k + 1) * s] for r in range(W) for k in range(len(self._covers[r]))]
        tree_over_nodes(nodes, pieces, lay.leaves, out=self._gather[0], scratch=pieces)
        self._gather[1:].copy_(self._gather[0].expand(W - 1, s))
        dist.all_to_all_single(self._result.view(W, s), self._gather, group=self.group)
        words = self._recv[:, widest * s:].clone().view(torch.float64)  # [W, rank leaves + 1]
        return words[:, :-1].reshape(-1).tolist(), words[:, -1].tolist()

    def grad_norm(self):
        """The L2 norm of the current flat gradient: the norm of each BLOCK of it (one fp32
        reduction per block, torch.linalg.vector_norm), their squares in float64 added by the
        canonical tree, the square root. Only the gradient's length decides the order: not
        the layout, not the thread count (one thread reduces one block)."""
        whole_blocks = -(-self.numel // BLOCK) * BLOCK
        return math.sqrt(_square_sum_by_blocks(self._result[:whole_blocks]).item())

    def tensor_grad_norms(self):
        """Each trainable parameter's gradient norm in the current flat gradient (before
        clipping when called from reduce()'s before_clip), in named_parameters() order:
        tensor_grad_norms(), the same bits on every layout."""
        return tensor_grad_norms(self._views)

    def step(self, optimizer):
        """optimizer.step() after checking that this step's gradient is the reduced one and
        nothing reached the parameters since reduce()."""
        if not self._reduced:
            raise InvariantError("optimizer step without reduce(): the gradient is not the step's", self.rank)
        self._check_grads()
        optimizer.step()
        self._reduced = False

    def flat_gradient(self):
        """The reduced (and clipped) gradient: a view of `numel` fp32 elements."""
        return self._result[:self.numel]

    def held_out_loss(self, leaf_sums, batches, tokens):
        """The held-out loss from this rank's leaf loss sums of `batches` evaluation batches
        (batch-major, each batch's leaves in order): every batch's leaves gathered and added
        by canonical_sum, the batches in order, divided once by `tokens`."""
        lay = self.layout
        mine = torch.tensor(list(leaf_sums), dtype=torch.float64, device=self.device)
        if mine.numel() != batches * lay.rank_leaves:
            raise InvariantError("%d held-out leaf sums for %d batches of %d leaves"
                                 % (mine.numel(), batches, lay.rank_leaves), self.rank)
        if lay.world_size > 1:
            rows = [torch.empty_like(mine) for _ in range(lay.world_size)]
            dist.all_gather(rows, mine, group=self.group)
        else:
            rows = [mine]
        per_rank = [row.view(batches, lay.rank_leaves).tolist() for row in rows]
        total = 0.0
        for b in range(batches):
            total += canonical_sum([v for r in range(lay.world_size) for v in per_rank[r][b]])
        return total / tokens

