#!/usr/bin/python3
"""An ordinary PyTorch DDP script that sweep drives: a small causal Transformer language
model on a file of byte tokens (examples/pytorch-script's corpus), AdamW with warmup and
cosine decay, gradient clipping, held-out evaluation, on 1 or more ranks.

torch.distributed starts from the env:// variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), which torchrun sets, and which `sweep run` sets for every rank
under mpiexec, mpirun or srun (README.md). gloo on the CPU, nccl with one GPU per local
rank when CUDA is there. Each step draws one global batch of world_size x batch_size
windows (the same on every layout) and rank r trains on its contiguous share, rows
[r B, (r+1) B); DDP averages the gradients. Rank 0 writes the record through sweep.init();
the other ranks' `run` calls do nothing. sweep.ddp.RankGradNorms measures each rank's own
gradient before DDP averages it (a communication hook running DDP's default all-reduce), so
the record's /ranks/grad_norm shows a rank whose data or replica went wrong.

  python3 train.py --steps 20 [--out DIR]               one process
  mpiexec -n 2 python3 train.py --batch-size 4         two ranks by hand (or torchrun)
  sweep run sweeps/pytorch-ddp.yaml                     a grid (lr x world size)
"""
import argparse
import datetime
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

try:
    import sweep
except ImportError:  # run in place: the repository's python/ beside examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python"))
    import sweep
from sweep.ddp import RankGradNorms  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser(description="a small Transformer language model under DDP")
parser.add_argument("--data", default=os.path.join(HERE, "..", "pytorch-script", "data", "corpus.bin"),
                    help="tokens, one byte each; the last 10%% is held out")
parser.add_argument("--vocab", type=int, default=64)
parser.add_argument("--seq-len", type=int, default=32)
parser.add_argument("--width", type=int, default=32)
parser.add_argument("--heads", type=int, default=2)
parser.add_argument("--layers", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=8, help="sequences per rank per step")
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--warmup", type=int, default=4)
parser.add_argument("--weight-decay", type=float, default=0.01)
parser.add_argument("--clip", type=float, default=1.0, help="gradient norm clip; 0 = off")
parser.add_argument("--eval-every", type=int, default=10)
parser.add_argument("--eval-rows", type=int, default=32, help="held-out windows per evaluation, all ranks together")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--timeout-s", type=float, default=300, help="how long a collective may wait")
parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
parser.add_argument("--out", default=None, help="where to write the record (none: nowhere)")
args = parser.parse_args()
ENV_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # what init_method="env://" reads
if "OMPI_COMM_WORLD_RANK" in os.environ and not all(os.environ.get(v) for v in ENV_VARS):  # mpiexec by hand
    for name, ompi in (("RANK", "RANK"), ("WORLD_SIZE", "SIZE"), ("LOCAL_RANK", "LOCAL_RANK")):
        os.environ[name] = os.environ["OMPI_COMM_WORLD_" + ompi]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
# Under sweep: lr is train.lr, batch_size train.micro_batch, width model.width, ...
run = sweep.init(args, keys={"timeout_s": "dist.timeout_s"}, out=args.out,
                 environment={"device": "cuda" if use_cuda else "cpu", "trainer": os.path.abspath(__file__)})

# --- torch.distributed from the env:// variables
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
local_rank = int(os.environ.get("LOCAL_RANK", 0))
for bad, why in ((args.eval_rows % world, "--eval-rows %d does not split over %d ranks" % (args.eval_rows, world)),
                 (args.width % args.heads, "--heads %d does not divide --width %d" % (args.heads, args.width))):
    if bad:  # every rank finds it; rank 0 says it
        if rank == 0:
            print("train.py: error: " + why, file=sys.stderr, flush=True)
        sys.exit(2)
if use_cuda:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")
backend = "nccl" if use_cuda else "gloo"
if world > 1:
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=args.timeout_s))
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.use_deterministic_algorithms(True)


def all_sum(values):
    """[sum over ranks] of a few numbers (float64), the same on every rank."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(t)
    return t.tolist()


class TinyLM(torch.nn.Module):
    """Token and position embeddings, pre-norm causal Transformer blocks, a linear head."""

    def __init__(self, vocab, width, heads, layers, seq_len):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(seq_len, width))
        block = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, layers)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("causal", torch.triu(torch.full((seq_len, seq_len), float("-inf")), 1))

    def forward(self, x):  # [B, L] token ids -> [B, L, vocab] logits
        n = x.shape[1]
        h = self.blocks(self.embed(x) + self.pos[:n], mask=self.causal[:n, :n])
        return self.head(self.norm(h))


tokens = torch.from_numpy(np.fromfile(args.data, dtype=np.uint8).astype(np.int64))
split = len(tokens) * 9 // 10  # the last 10% is held out
train_tokens, held_out = tokens[:split], tokens[split:]


def windows(source, generator, rows):
    """`rows` windows of seq_len + 1 tokens at offsets drawn from `generator`."""
    starts = torch.randint(0, len(source) - args.seq_len - 1, (rows,), generator=generator)
    return torch.stack([source[s:s + args.seq_len + 1] for s in starts.tolist()])


def my_share(rows):
    """This rank's contiguous share of a global batch."""
    n = rows.shape[0] // world
    return rows[rank * n:(rank + 1) * n].to(device)


def learning_rate(step):
    if step <= args.warmup:
        return args.lr * step / max(1, args.warmup)
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return 0.1 * args.lr + 0.45 * args.lr * (1 + math.cos(math.pi * progress))


def evaluate(model):
    """Held-out loss and accuracy over eval_rows fixed windows, each rank its share."""
    model.eval()
    with torch.no_grad():
        seq = my_share(windows(held_out, torch.Generator().manual_seed(1234), args.eval_rows))
        logits = model(seq[:, :-1])
        loss_sum = F.cross_entropy(logits.reshape(-1, args.vocab), seq[:, 1:].reshape(-1), reduction="sum").item()
        correct = (logits.argmax(-1) == seq[:, 1:]).sum().item()
    model.train()
    loss_sum, correct, count = all_sum([loss_sum, correct, seq[:, 1:].numel()])
    return loss_sum / count, correct / count, int(count)


global_batch = world * args.batch_size
torch.manual_seed(args.seed)  # the same initial parameters on every rank (DDP also broadcasts rank 0's)
model = TinyLM(args.vocab, args.width, args.heads, args.layers, args.seq_len).to(device)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None) \
    if world > 1 else model
rank_norms = RankGradNorms(ddp)  # each rank's own gradient, measured before DDP averages it
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay)
run.watch(model)  # parameter checksums: the module itself, not the DDP wrapper
print("rank %d of %d (local rank %d, %s, %s, rendezvous %s): %d of %d sequences a step"
      % (rank, world, local_rank, backend, device,
         "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]) if world > 1 else "none",
         args.batch_size, global_batch), flush=True)
for step in range(1, args.steps + 1):
    rows = windows(train_tokens, torch.Generator().manual_seed(args.seed * 1000003 + step), global_batch)
    seq = my_share(rows)
    logits = ddp(seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, args.vocab), seq[:, 1:].reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # DDP's all-reduce averages the ranks' gradients
    correct = (logits.argmax(-1) == seq[:, 1:]).sum().item()
    loss_sum, correct = all_sum([loss.item() * seq[:, 1:].numel(), correct])
    n = global_batch * args.seq_len
    # torch's clip (the same bits) with the gradient telemetry before it, on every rank: each
    # tensor's norm every 10 steps, at spikes and at the end; each rank's share every step
    # (/ranks/grad_norm).
    norm = run.clip_grad_norm_(step, loss_sum / n, args.clip if args.clip > 0 else float("inf"),
                               rank_norms=rank_norms.gather())
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step)
    optimizer.step()
    if rank == 0:
        print("step %d loss %.4f accuracy %.3f" % (step, loss_sum / n, correct / n), flush=True)
    run.log(step, loss_sum / n, lr=learning_rate(step), grad_norm=norm, tokens=n, accuracy=correct / n)
    if step % args.eval_every == 0 or step == args.steps:
        eval_loss, eval_accuracy, eval_tokens = evaluate(model)
        if rank == 0:
            print("eval %d loss %.4f accuracy %.3f" % (step, eval_loss, eval_accuracy), flush=True)
        run.eval(step, eval_loss, eval_tokens, accuracy=eval_accuracy)
run.finish()
print("rank %d done" % rank, flush=True)
del ddp  # DDP before its process group: the other order can abort at exit in torch 1.13
if world > 1:
    dist.destroy_process_group()
