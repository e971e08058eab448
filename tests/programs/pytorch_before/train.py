#!/usr/bin/python3
"""A plain PyTorch training script, before sweep: a GRU language model on a file of byte
tokens, AdamW with warmup and cosine decay, gradient clipping, held-out evaluation.
examples/pytorch-script/train.py is this script after adopting sweep's Python API; the
test (tests/python/test_pytorch_script.py) holds the two to at most 12 new or changed lines."""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from model import GruLm

parser = argparse.ArgumentParser(description="a GRU language model on a file of byte tokens")
parser.add_argument("--data", default="data/corpus.bin", help="tokens, one byte each")
parser.add_argument("--vocab", type=int, default=64)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--layers", type=int, default=1)
parser.add_argument("--dropout", type=float, default=0.0)
parser.add_argument("--seq-len", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--warmup", type=int, default=6)
parser.add_argument("--weight-decay", type=float, default=0.01)
parser.add_argument("--clip", type=float, default=1.0, help="gradient norm clip; 0 = off")
parser.add_argument("--eval-every", type=int, default=10)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", default=None, help="where to write the record (none: nowhere)")
args = parser.parse_args()

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.use_deterministic_algorithms(True)
tokens = torch.from_numpy(np.fromfile(args.data, dtype=np.uint8).astype(np.int64))
split = len(tokens) * 9 // 10  # the last 10% is held out
train_tokens, held_out = tokens[:split], tokens[split:]


def batch(source, generator, rows):
    """`rows` windows of seq_len + 1 tokens at offsets drawn from `generator`."""
    starts = torch.randint(0, len(source) - args.seq_len - 1, (rows,), generator=generator)
    return torch.stack([source[s:s + args.seq_len + 1] for s in starts.tolist()])


def learning_rate(step):
    if step <= args.warmup:
        return args.lr * step / max(1, args.warmup)
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return 0.1 * args.lr + 0.45 * args.lr * (1 + math.cos(math.pi * progress))


def evaluate(model):
    model.eval()
    with torch.no_grad():
        seq = batch(held_out, torch.Generator().manual_seed(1234), 64)
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), seq[:, 1:].reshape(-1)).item()
        accuracy = (logits.argmax(-1) == seq[:, 1:]).float().mean().item()
    model.train()
    return loss, accuracy, seq[:, 1:].numel()


torch.manual_seed(args.seed)
model = GruLm(args.vocab, args.width, args.layers, args.dropout)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay)
start = 1
for step in range(start, args.steps + 1):
    seq = batch(train_tokens, torch.Generator().manual_seed(args.seed * 1000003 + step), args.batch_size)
    logits = model(seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, args.vocab), seq[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip if args.clip > 0 else float("inf")).item()
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step)
    optimizer.step()
    accuracy = (logits.argmax(-1) == seq[:, 1:]).float().mean().item()
    print("step %d loss %.4f accuracy %.3f" % (step, loss.item(), accuracy), flush=True)
    if step % args.eval_every == 0 or step == args.steps:
        eval_loss, eval_accuracy, eval_tokens = evaluate(model)
        print("eval %d loss %.4f accuracy %.3f" % (step, eval_loss, eval_accuracy), flush=True)
if args.out:
    os.makedirs(args.out, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
