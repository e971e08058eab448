#!/usr/bin/python3
"""A PyTorch language model whose bits depend on its global batch, not on its layout.

A token-shift language model (embedding, one attention-free block, linear head) trained
with AdamW, clipping and a warmup schedule on sweep-train's seeded Markov chain, with the
canonical reduction of python/sweep/invariant.py instead of DDP's all-reduce: every
factorisation W ranks x A accumulation steps of the global batch (and, with --leaf, every
micro-batch size) trains the same losses, held-out losses and parameters, bit for bit.

  mpiexec -n W python3 train.py --world-batch G --accum A [--out DIR] ...
  sweep run sweeps/pytorch-invariance.yaml          (a grid's program: section, sweep.init)
  ... --plain-ddp                                   the same model with ordinary DDP

Its settings and record go through sweep.init() (python/sweep/run.py): under `sweep run`
they come from the run's config (SWEEP_CONFIG; --lr is train.lr, --accum train.accum, the
global batch dist.world_size x train.accum x train.micro_batch, --plain-ddp dist.reduction
native), and rank 0 writes the record to the run directory; outside sweep the options
hold, and rank 0 writes DIR/record.h5 with --out. The record holds every step's loss,
learning rate, gradient norm, clip coefficient and parameter checksum, and the held-out
losses in /eval. torch.distributed starts from the env:// variables sweep sets (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), else from Open MPI's when started by mpiexec by
hand. Rank 0 prints one line per step (loss, gradient norm, held-out loss, parameter
checksum). Exit codes: 0 completed, 1 failed, 2 bad config, usage or layout, 3 refused (a
record is already there).
"""
import argparse
import contextlib
import datetime
import gc
import math
import os
import re
import sys
import time

# The thread pools read these when torch loads: one thread unless the caller said otherwise
# (sweep sets them from train.threads), since the bits are promised per thread count.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

_PYTHON = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python")
try:
    import sweep
    from sweep import invariant
    import sweep_record
except ImportError:  # run in place: the repository's python/ beside examples/
    sys.path.insert(0, _PYTHON)
    import sweep
    from sweep import invariant
    import sweep_record

KIND = "torch-invariant-lm"


class TokenShiftLM(torch.nn.Module):
    """embedding -> LayerNorm -> [this position, the previous one] -> MLP (GELU, dropout)
    -> residual -> LayerNorm -> linear head. Attention-free, so every op is per row: a
    leaf's output depends on its own sequences only. Dropout masks come from the generator
    the caller passes (one per leaf: invariant.leaf_generator)."""

    def __init__(self, vocab, width, dropout):
        super().__init__()
        self.dropout = dropout
        self.embed = torch.nn.Embedding(vocab, width)
        self.norm_in = torch.nn.LayerNorm(width)
        self.mix = torch.nn.Linear(2 * width, 4 * width)
        self.proj = torch.nn.Linear(4 * width, width)
        self.norm_out = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens, generator=None):  # [rows, L] token ids -> [rows, L, vocab] logits
        h = self.embed(tokens)
        u = self.norm_in(h)
        previous = F.pad(u, (0, 0, 1, 0))[:, :-1]  # token shift: each position sees the one before
        z = F.gelu(self.mix(torch.cat([u, previous], dim=-1)))
        if self.training and self.dropout > 0:
            keep = torch.rand(z.shape, generator=generator, device=z.device) >= self.dropout
            z = z * keep.to(z.dtype) * (1.0 / (1.0 - self.dropout))
        return self.head(self.norm_out(h + self.proj(z)))


def loss_sum(logits, targets):
    """The token-loss sum (fp32) of a leaf: divided once, by the global token count."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


# ---------------------------------------------------------------------------------------
# Settings: command-line options, or the run's config under sweep (sweep.init)

class UsageError(Exception):
    pass


# (option, attribute, type, default, config key, help). A config key of None: no key.
SETTINGS = [
    ("--world-batch", "world_batch", int, 12, None,
     "sequences per optimizer step, all ranks together (G; under sweep: world_size x accum x micro_batch)"),
    ("--accum", "accum", int, None, "train.accum", "micro-batches per rank per step (A; default: G / (W x B), or 1)"),
    ("--micro-batch", "micro_batch", int, None, "train.micro_batch",
     "sequences per micro-batch (B; default: G / (W x A))"),
    ("--leaf", "leaf", int, 0, "model.leaf",
     "sequences per leaf, each its own forward and backward (the micro-batch becomes layout); 0 = the micro-batch"),
    ("--steps", "steps", int, 8, "train.steps", "optimizer steps"),
    ("--lr", "lr", float, 3e-3, "train.lr", "peak learning rate"),
    ("--min-lr", "min_lr", float, 3e-4, "train.min_lr", "floor of the cosine decay"),
    ("--schedule", "schedule", str, "cosine", "train.schedule", "constant, linear or cosine decay after the warmup"),
    ("--warmup", "warmup", int, 2, "train.warmup", "linear warmup steps"),
    ("--weight-decay", "weight_decay", float, 0.01, "train.weight_decay", "AdamW decoupled weight decay"),
    ("--beta1", "beta1", float, 0.9, "train.beta1", "AdamW first-moment decay"),
    ("--beta2", "beta2", float, 0.95, "train.beta2", "AdamW second-moment decay"),
    ("--eps", "eps", float, 1e-8, "train.eps", "AdamW epsilon"),
    ("--clip", "clip", float, 1.0, "train.clip_norm", "global gradient-norm clip; 0 = off"),
    ("--seed", "seed", int, 0, "train.seed", "initial parameters, sampling order and dropout"),
    ("--precision", "precision", str, "fp32", "train.precision",
     "fp32, or bf16 (autocast; fp32 parameters and gradients)"),
    ("--eval-every", "eval_every", int, 0, "train.eval_every",
     "held-out evaluation every N steps and after the last; 0 = none"),
    ("--eval-batches", "eval_batches", int, 2, "train.eval_batches", "global batches per held-out evaluation"),
    ("--checksum-every", "checksum_every", int, 1, "train.checksum_every",
     "parameter checksums in the record every N steps (and at step 0 and the last)"),
    ("--telemetry-every", "telemetry_every", int, 10, "train.telemetry_every",
     "a row of each tensor's gradient norm every N steps, and at the last, a spiking or a non-finite step; "
     "0 = only those"),
    ("--threads", "threads", int, 1, "train.threads", "torch intra-op threads per rank"),
    ("--vocab", "vocab", int, 64, "model.vocab", "token ids are in [0, vocab)"),
    ("--seq-len", "seq_len", int, 16, "model.seq_len", "tokens predicted per sequence"),
    ("--width", "width", int, 32, "model.width", "embedding width (the MLP is 4x)"),
    ("--dropout", "dropout", float, 0.0, "model.dropout", "dropout in the MLP, masks drawn per leaf"),
    ("--data-seed", "data_seed", int, 0, "data.seed", "seeds the Markov chain"),
    ("--branching", "branching", int, 4, "data.branching", "successors per token (entropy floor ln branching)"),
    ("--samples", "samples", int, 4096, "data.samples", "training sequences per epoch (held-out ones follow them)"),
    ("--timeout", "timeout", float, 300, "dist.timeout_s", "seconds a collective may wait before the run fails"),
]
# What the bits depend on; a checkpoint resumes only a run that agrees on all of them.
MATH = ["world_batch", "leaf_sequences", "steps", "lr", "min_lr", "schedule", "warmup", "weight_decay", "beta1",
        "beta2", "eps", "clip", "seed", "precision", "eval_every", "eval_batches", "vocab", "seq_len", "width",
        "dropout", "data_seed", "branching", "samples", "plain_ddp"]


def parse_options(argv):
    p = argparse.ArgumentParser(description="a layout-invariant PyTorch language model (sweep.invariant)")
    for option, attr, typ, default, _, help_ in SETTINGS:
        p.add_argument(option, dest=attr, type=typ, default=default, help=help_)
    p.add_argument("--plain-ddp", action="store_true",
                   help="ordinary DDP and gradient accumulation (not invariant; under sweep: dist.reduction native)")
    p.add_argument("--out", help="directory for record.h5 and checkpoints (rank 0 writes); under sweep the run's")
    p.add_argument("--save-at", type=int, default=0,
                   help="save a checkpoint after this step (OUT/checkpoints/step_N.pt)")
    p.add_argument("--resume-from", help="a checkpoint of this math, saved on any layout")
    p.add_argument("--resume", action="store_true", help="resume from the newest checkpoint in OUT, if any")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: NCCL, one GPU per local rank")
    p.add_argument("--master-port", type=int, help="under mpiexec without MASTER_PORT: the rendezvous port (29500)")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    opt = p.parse_args(argv)  # a usage error exits 2
    check_options(opt)
    return opt


def check_options(opt):
    if opt.precision not in ("fp32", "bf16"):
        raise UsageError("precision '%s': fp32 or bf16" % opt.precision)
    if opt.schedule not in ("constant", "linear", "cosine"):
        raise UsageError("schedule '%s': constant, linear or cosine" % opt.schedule)
    if opt.plain_ddp and opt.leaf:
        raise UsageError("--leaf with --plain-ddp: ordinary DDP runs whole micro-batches")
    if opt.save_at and not opt.out:
        raise UsageError("--save-at needs --out")
    if opt.checksum_every < 1:
        raise UsageError("--checksum-every %d: at least 1" % opt.checksum_every)


def open_record(opt, rank, world):
    """sweep.init() for this run: the settings from the run's config under sweep (into
    `opt`), its record (rank 0 writes it). Outside sweep the record's config is the
    options with the layout they resolve to. Raises UsageError for settings that cannot
    run; nothing is written before the first record call."""
    settings, keys = {}, {}
    for _, attr, _, _, key, _ in SETTINGS:
        if key:
            settings[attr], keys[attr] = getattr(opt, attr), key
    for name, key, value in (("kind", "model.kind", KIND), ("data_kind", "data.kind", "synthetic"),
                             ("world_size", "dist.world_size", world),
                             ("reduction", "dist.reduction", "native" if opt.plain_ddp else "canonical")):
        settings[name], keys[name] = value, key
    try:  # outside sweep the config names the layout the options resolve to
        layout = invariant.Layout(opt.world_batch, world, rank, accum=opt.accum, micro_batch=opt.micro_batch,
                                  leaf=opt.leaf)
        settings["accum"], settings["micro_batch"] = layout.accum, layout.micro_batch
        resolved = None
    except invariant.InvariantError as e:  # the same on every rank
        resolved = e
    try:
        record = sweep.init(settings, keys=keys, out=opt.out,
                            environment={"trainer": os.path.abspath(__file__), "trainer.models": KIND,
                                         "device": opt.device})
    except (ValueError, sweep_record.RecordError) as e:  # a config value that is not of its setting's type
        raise UsageError(str(e))
    if not record.under_sweep:
        if resolved is not None:
            raise UsageError(str(resolved))
        return record
    cfg = record.config
    if cfg.get("model.kind") != KIND:
        raise UsageError("model.kind '%s': this program trains %s" % (cfg.get("model.kind"), KIND))
    missing = [k for k in ("train.accum", "train.micro_batch", "dist.world_size") if k not in cfg]
    if missing:
        raise UsageError("%s missing from the run's config" % ", ".join(missing))
    for _, attr, _, _, key, _ in SETTINGS:
        if key:
            setattr(opt, attr, settings[attr])
    if settings["reduction"] not in ("canonical", "native"):
        raise UsageError("dist.reduction '%s': canonical or native" % settings["reduction"])
    opt.plain_ddp = settings["reduction"] == "native"
    if settings["world_size"] != world:
        raise UsageError("dist.world_size %d, but %d ranks were started" % (settings["world_size"], world))
    opt.world_batch = world * opt.accum * opt.micro_batch
    if float(cfg.get("data.eval_fraction", 0)) > 0:
        held_out = math.ceil(float(cfg["data.eval_fraction"]) * opt.samples)
        if opt.eval_batches * opt.world_batch > held_out:
            raise UsageError("train.eval_batches %d x %d sequences is more than the %d held out"
                             % (opt.eval_batches, opt.world_batch, held_out))
    else:
        opt.eval_every = 0  # sweep holds nothing out: no evaluation
    opt.out = record.dir  # checkpoints go to the run directory
    check_options(opt)
    return record


# ---------------------------------------------------------------------------------------
# torch.distributed

def ranks_from_env(opt):
    """(rank, world) before any process group: the env:// variables when all of RANK,
    WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set (sweep run, torchrun), else Open MPI's
    OMPI_COMM_WORLD_RANK/SIZE (mpiexec by hand: RANK and WORLD_SIZE are set from them,
    MASTER_ADDR 127.0.0.1 unless set, MASTER_PORT from --master-port, MASTER_PORT or
    29500), else one process."""
    env = os.environ
    if all(env.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        return int(env["RANK"]), int(env["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" in env:
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        env["RANK"], env["WORLD_SIZE"] = str(rank), str(world)
        env.setdefault("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env["MASTER_PORT"] = str(opt.master_port or env.get("MASTER_PORT") or 29500)
        return rank, world
    return 0, 1


def init_distributed(opt):
    """(rank, world) of ranks_from_env, with torch.distributed started (init_method
    env://) for more than one rank, and for --plain-ddp on one (DDP needs a group)."""
    rank, world = ranks_from_env(opt)
    backend = "nccl" if opt.device == "cuda" else "gloo"
    timeout = datetime.timedelta(seconds=opt.timeout)
    if world > 1:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world, timeout=timeout)
    elif opt.plain_ddp:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    return rank, world


# ---------------------------------------------------------------------------------------
# One run: what the loop needs, the two ways of taking a step, and the loop itself

class Run:
    """The model, optimizer, data and layout of one run on this rank."""

    def __init__(self, opt, layout):
        self.opt, self.layout = opt, layout
        self.rank, self.world = layout.rank, layout.world_size
        if opt.device == "cuda":
            local = int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
            self.device = torch.device("cuda", local % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        torch.manual_seed(opt.seed)  # the same initial parameters on every rank
        self.model = TokenShiftLM(opt.vocab, opt.width, opt.dropout).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=opt.lr, betas=(opt.beta1, opt.beta2),
                                           eps=opt.eps, weight_decay=opt.weight_decay, foreach=False)
        source = invariant.MarkovSource(opt.data_seed, opt.vocab, opt.branching)
        self.sampler = invariant.Sampler(source, opt.seed, opt.samples, opt.seq_len, self.layout)
        self.tokens = opt.world_batch * opt.seq_len  # targets per step
        self.grads = None  # CanonicalGradients, made by start() once the parameters are final
        self.ddp = None
        # Called by each step with its StepResult once the gradient is reduced, before it is
        # clipped (the Recorder takes the gradient telemetry there).
        self.telemetry = lambda step, result: None

    def start(self):
        """After any checkpoint is loaded: the reduction that checks the replicas."""
        if self.opt.plain_ddp:
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
        else:
            self.grads = invariant.CanonicalGradients(self.model, self.layout, self.tokens)

    def autocast(self):
        if self.opt.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def leaf_rows(self, step, k):
        """(global leaf index, rows) of this rank's micro-batch k of 1-based `step`."""
        lay = self.layout
        rows = self.sampler.batch(step - 1, k).to(self.device)
        first = lay.global_micro_batch(k) * lay.leaves_per_micro_batch
        return list(enumerate(lay.leaves_of(rows), start=first))

    def learning_rate(self, step):
        o = self.opt
        if o.warmup > 0 and step <= o.warmup:
            return o.lr * step / o.warmup
        if o.schedule == "constant" or o.steps == o.warmup:
            return o.lr
        progress = (step - o.warmup) / (o.steps - o.warmup)
        if o.schedule == "linear":
            return o.min_lr + (o.lr - o.min_lr) * (1.0 - progress)
        return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + math.cos(math.pi * progress))


def invariant_step(run, step):
    """One step with sweep.invariant: each leaf's backward folds into the canonical tree,
    reduce() completes it across ranks, clips, and hands AdamW the result."""
    run.model.train()
    for k in range(run.layout.accum):
        for leaf, rows in run.leaf_rows(step, k):
            generator = invariant.leaf_generator(run.opt.seed, step - 1, leaf, run.device)
            with run.autocast():
                logits = run.model(rows[:, :-1], generator)
            run.grads.backward(loss_sum(logits, rows[:, 1:]))
    result = run.grads.reduce(clip_norm=run.opt.clip, before_clip=lambda r: run.telemetry(step, r))
    if finite(result):
        run.grads.step(run.optimizer)
    return result


def plain_ddp_step(run, step):
    """The same step the ordinary way: a mean loss per micro-batch over A, DDP's averaging
    all-reduce on the last one, clip_grad_norm_. Its bits depend on the layout."""
    run.model.train()
    run.optimizer.zero_grad(set_to_none=True)
    local_sum, accum = 0.0, run.layout.accum
    for k in range(accum):
        sync = contextlib.nullcontext() if k == accum - 1 else run.ddp.no_sync()
        with sync:
            for leaf, rows in run.leaf_rows(step, k):
                generator = invariant.leaf_generator(run.opt.seed, step - 1, leaf, run.device)
                with run.autocast():
                    total = loss_sum(run.ddp(rows[:, :-1], generator), rows[:, 1:])
                (total / (rows.shape[0] * run.opt.seq_len) / accum).backward()
                local_sum += total.item()
    loss = torch.tensor([local_sum], dtype=torch.float64, device=run.device)
    dist.all_reduce(loss)
    run.telemetry(step, invariant.StepResult(loss.item() / run.tokens, None, 1.0))  # before clipping
    max_norm = run.opt.clip if run.opt.clip > 0 else float("inf")
    grad_norm = float(torch.nn.utils.clip_grad_norm_(run.model.parameters(), max_norm))
    clip_coef = min(max_norm / (grad_norm + 1e-6), 1.0)
    result = invariant.StepResult(loss.item() / run.tokens, grad_norm, clip_coef)
    if finite(result):
        run.optimizer.step()
    return result


def finite(result):
    """A step whose loss or gradient is not finite is not applied, and ends the run."""
    return math.isfinite(result.loss) and math.isfinite(result.grad_norm)


def held_out_loss(run):
    """The held-out loss over opt.eval_batches global batches: leaf loss sums, added by the
    canonical tree (invariant) or summed by all_reduce (plain DDP)."""
    run.model.eval()
    sums = []
    with torch.no_grad():
        for batch in range(run.opt.eval_batches):
            for k in range(run.layout.accum):
                rows = run.sampler.held_out(batch, k).to(run.device)
                for piece in run.layout.leaves_of(rows):
                    with run.autocast():
                        sums.append(loss_sum(run.model(piece[:, :-1]), piece[:, 1:]).item())
    tokens = run.opt.eval_batches * run.tokens
    if run.grads is not None:
        return run.grads.held_out_loss(sums, run.opt.eval_batches, tokens)
    total = torch.tensor([sum(sums)], dtype=torch.float64, device=run.device)
    dist.all_reduce(total)
    return total.item() / tokens


def train(run, first_step, report):
    """The training loop: steps first_step + 1 .. steps, each one step function, the
    learning rate before it and the held-out loss after it when due; report(step, lr,
    result, eval_loss, seconds) is told every step (and may save a checkpoint). Returns
    None, or why the run diverged."""
    take_step = plain_ddp_step if run.opt.plain_ddp else invariant_step
    for step in range(first_step + 1, run.opt.steps + 1):
        lr = run.learning_rate(step)
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        start = time.perf_counter()
        result = take_step(run, step)
        seconds = time.perf_counter() - start
        eval_loss = None
        if run.opt.eval_every and (step % run.opt.eval_every == 0 or step == run.opt.steps):
            eval_loss = held_out_loss(run)
        report(step, lr, result, eval_loss, seconds)
        if not finite(result):
            return "non-finite loss or gradient at step %d; its update was not applied" % step
    return None


# ---------------------------------------------------------------------------------------
# Recording, checkpoints and the entry point

def math_of(run):
    """The settings the bits depend on, for a checkpoint to be resumed only by its math."""
    values = {a: getattr(run.opt, a) for a in MATH if a != "leaf_sequences"}
    values["leaf_sequences"] = run.layout.leaf  # without --leaf the micro-batch is math
    return values


# watch()'s own period, never reached: the loop checksums the steps itself (run.checksum),
# so the steps a resumed run records again from its checkpoint get none from the model.
NEVER = 1 << 62


class Recorder:
    """The run's outputs through sweep.init's `record` (every rank calls it; rank 0 writes):
    a row, a parameter checksum every checksum_every steps, the held-out loss (/eval) per
    step, the gradient telemetry (each tensor's norm every telemetry_every steps, at spikes
    and at the last step; each rank's own norm every step), a line per step on rank 0, and
    the checkpoint of --save-at. A resumed run records
    the checkpoint's rows first, so its record is that of the run trained straight through:
    the same rows, and the parameter checksums of step 0, of the checkpoint's step and of
    every step after it."""

    def __init__(self, run, record):
        self.run, self.record = run, record
        self.history = []  # every step's row since step 1 (rank 0): what a checkpoint carries
        self.every = run.opt.checksum_every
        record.watch(run.model, every=NEVER, telemetry_every=run.opt.telemetry_every)  # step 0
        run.telemetry = self.gradients
        self.taken = {}  # this step's telemetry, for its row

    def gradients(self, step, result):
        """The step's gradient telemetry (record.gradients), before clipping: the tensors'
        norms of the canonical gradient (layout-free bits), each rank's own norm; plain
        DDP's from its averaged .grad, the norm computed from them."""
        grads = self.run.grads
        why = self.record.gradients(step, result.loss, self.run.model, grad_norm=result.grad_norm,
                                    tensor_norms=grads.tensor_grad_norms if grads else None,
                                    rank_norms=grads.rank_grad_norms if grads else None)
        last = self.record.last_telemetry
        self.taken = {"tensor_norms": last[2] if why and last and last[0] == step else None,
                      "rank_norms": list(grads.rank_grad_norms) if grads else None,
                      "grad_norm_before_clip": self.record.last_grad_norm}

    def resume(self, state):
        """After the checkpoint's parameters are loaded: its rows, then its step's checksum."""
        for row in state["history"]:
            self.replay_gradients(row)
            self.write(row)
        self.record.checksum(state["step"])

    def replay_gradients(self, row):
        """A checkpoint's row's telemetry, decided again as it was (the same loss and norm);
        each rank's own norms only on the layout that measured them."""
        def saved():
            if row.get("tensor_norms") is None:
                raise UsageError("the checkpoint's row of step %d holds no tensor gradient norms" % row["step"])
            return row["tensor_norms"]
        ranks, norm = row.get("rank_norms"), row.get("grad_norm_before_clip", row["grad_norm"])
        self.record.gradients(row["step"], row["loss"], grad_norm=norm, tensor_norms=saved,
                              rank_norms=ranks if ranks and len(ranks) == self.run.world else None)
        self.taken = {"tensor_norms": row.get("tensor_norms"), "rank_norms": ranks,
                      "grad_norm_before_clip": norm}

    def write(self, row):
        self.history.append(row)
        self.record.log(row["step"], row["loss"], lr=row["lr"], grad_norm=row["grad_norm"],
                        clip_coef=row["clip_coef"], tokens=row["tokens"], step_time_s=row["step_time_s"])
        if row["eval_loss"] is not None:
            self.record.eval(row["step"], row["eval_loss"], row["eval_tokens"])

    def report(self, step, lr, result, eval_loss, seconds):
        """train()'s report: one row a step; the checkpoint at --save-at."""
        o = self.run.opt
        row = {"step": step, "loss": result.loss, "lr": lr, "grad_norm": result.grad_norm,
               "clip_coef": result.clip_coef, "tokens": self.run.tokens, "step_time_s": seconds,
               "eval_loss": eval_loss, "eval_tokens": o.eval_batches * self.run.tokens}
        row.update(self.taken)
        self.write(row)
        if step % self.every == 0:
            self.record.checksum(step)
        if self.run.rank == 0 and not o.quiet:
            flat, _ = sweep_record.checksums_of([(n, p.detach().cpu().numpy())
                                                 for n, p in self.run.model.named_parameters()])
            print("step %d loss %r grad_norm %r clip %r eval %r checksum %016x"
                  % (step, result.loss, result.grad_norm, result.clip_coef, eval_loss, flat), flush=True)
        if step == o.save_at:
            self.save(step)

    def save(self, step):
        """OUT/checkpoints/step_N.pt, written atomically by rank 0: parameters, AdamW state,
        the rows so far and the math; nothing of the layout."""
        if self.run.rank != 0:
            return
        directory = os.path.join(self.run.opt.out, "checkpoints")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "step_%d.pt" % step)
        state = {"step": step, "math": math_of(self.run), "model": self.run.model.state_dict(),
                 "optimizer": self.run.optimizer.state_dict(), "history": self.history}
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)

    def finish(self, diverged):
        self.record.summary("layout", self.run.layout.describe())
        self.record.summary("reduction", "ddp" if self.run.opt.plain_ddp else "canonical (sweep.invariant)")
        if diverged:
            self.record.finish("diverged", diverged)
        else:
            self.record.finish()


def read_checkpoint(run, path):
    """A checkpoint of the same math, saved on any layout (UsageError otherwise)."""
    try:
        state = torch.load(path, map_location=run.device)
    except (OSError, RuntimeError) as e:
        raise UsageError("%s: cannot read the checkpoint: %s" % (path, e))
    mine = math_of(run)
    for key, value in state["math"].items():
        if mine.get(key) != value:
            raise UsageError("%s: the checkpoint was trained with %s %r, this run has %r"
                             % (path, key, value, mine.get(key)))
    return state


def newest_checkpoint(out):
    """OUT/checkpoints/step_N.pt of the largest N, or None."""
    directory = os.path.join(out, "checkpoints")
    names = os.listdir(directory) if os.path.isdir(directory) else []
    steps = [int(m.group(1)) for m in (re.fullmatch(r"step_(\d+)\.pt", n) for n in names) if m]
    return os.path.join(directory, "step_%d.pt" % max(steps)) if steps else None


def say_once(rank, message, everywhere=True):
    if rank == 0 or not everywhere:
        print("train.py: error: %s" % message, file=sys.stderr, flush=True)


def main(argv):
    try:
        opt = parse_options(argv)
    except UsageError as e:
        print("train.py: error: %s" % e, file=sys.stderr, flush=True)
        return 2
    rank, world = ranks_from_env(opt)
    try:
        record = open_record(opt, rank, world)
    except UsageError as e:  # every rank finds it: said once
        say_once(rank, e)
        return 2
    if record.dir and os.path.lexists(os.path.join(record.dir, "record.h5")):
        say_once(rank, "%s: a completed record is already there" % record.dir)
        return 3
    if opt.device == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.set_num_threads(opt.threads)
    torch.use_deterministic_algorithms(True)
    init_distributed(opt)
    run = recorder = None
    try:
        try:
            layout = invariant.Layout(opt.world_batch, world, rank, accum=opt.accum, micro_batch=opt.micro_batch,
                                      leaf=opt.leaf)
        except invariant.InvariantError as e:  # bad settings: the same on every rank
            raise UsageError(str(e))
        run = Run(opt, layout)
        resume = opt.resume_from or (opt.resume and opt.out and newest_checkpoint(opt.out))
        state = read_checkpoint(run, resume) if resume else None
        recorder = Recorder(run, record)
        if state:
            run.model.load_state_dict(state["model"])
            run.optimizer.load_state_dict(state["optimizer"])
            recorder.resume(state)
        run.start()
        diverged = train(run, state["step"] if state else 0, recorder.report)
        recorder.finish(diverged)
    except UsageError as e:  # every rank finds it: said once
        say_once(rank, e)
        record.fail(str(e))
        return 2
    except invariant.InvariantError as e:
        say_once(rank, e, e.everywhere)
        record.fail(str(e))
        return 1
    finally:
        # On every way out, errors included: DDP first, then the process group, while the
        # interpreter is whole. A group left to the interpreter's exit can abort the
        # process in torch 1.13 (exit 134, "terminate called without an active
        # exception"), and the DDP-then-group order matters the same way.
        run = recorder = None
        gc.collect()
        if dist.is_initialized():
            dist.destroy_process_group()
    if diverged:
        if rank == 0:
            print("train.py: diverged: %s" % diverged, file=sys.stderr, flush=True)
        return 1
    if rank == 0 and not opt.quiet:
        print("completed: %d steps on %s" % (opt.steps, layout.describe()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
