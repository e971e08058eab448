"""A GPT training script shaped like the public ones people bring (nanoGPT's train.py):
its config is module globals, overridden by config files and --key=value through an
exec'd configurator; DDP is detected from RANK; it evaluates at the top of its loop and
trains iterations 0 to max_iters inclusive; gradient_accumulation_steps counts the whole
world's micro-batches and is divided by the world size. train.py is the same script after
adopting sweep; the test counts the lines it changed.

    python train_before.py config/tiny.py
    torchrun --nproc_per_node=2 train_before.py config/tiny.py
"""
import math
import os
import time

import numpy as np
import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPTConfig

# -----------------------------------------------------------------------------
# default config values
out_dir = "out"
eval_interval = 20
log_interval = 1
eval_iters = 10
data_path = "tokens.bin"
gradient_accumulation_steps = 4  # micro-batches of the whole world a step
batch_size = 8  # micro-batch size
block_size = 64
n_layer = 4
n_head = 4
n_embd = 64
dropout = 0.0
learning_rate = 6e-4
max_iters = 100
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 10
lr_decay_iters = 100
min_lr = 6e-5
backend = "gloo"
seed = 1337
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
exec(open("configurator.py").read())  # overrides from the command line or a config file
config = {k: globals()[k] for k in config_keys}
# -----------------------------------------------------------------------------

ddp = int(os.environ.get("RANK", -1)) != -1  # a torch.distributed run?
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ["RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
    assert gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps //= ddp_world_size
else:
    master_process = True
    seed_offset = 0
    ddp_world_size = 1
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
if master_process:
    print(f"tokens per iteration will be: {tokens_per_iter:,}")
    os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(seed + seed_offset)
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

data = np.fromfile(data_path, dtype=np.uint16)
split = int(0.9 * len(data))


def get_batch(part):
    d = data[:split] if part == "train" else data[split:]
    ix = torch.randint(len(d) - block_size - 1, (batch_size,))
    x = torch.stack([torch.from_numpy(d[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(d[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    return x, y


iter_num = 0
best_val_loss = 1e9
model = GPT(GPTConfig(block_size=block_size, vocab_size=64, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                      dropout=dropout))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))
raw_model = model
if ddp:
    model = DDP(model)


@torch.no_grad()
def estimate_loss():
    out = {}
    raw_model.eval()
    for part in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(part)
            _, loss = raw_model(X, Y)
            losses[k] = loss.item()
        out[part] = losses.mean().item()
    raw_model.train()
    return out


def get_lr(it):
    """Linear warmup, then cosine decay to min_lr at lr_decay_iters."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


X, Y = get_batch("train")
t0 = time.time()
while True:
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        best_val_loss = min(best_val_loss, losses["val"])
    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % log_interval == 0 and master_process:
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.3e}, time {dt * 1000:.2f}ms")
    iter_num += 1
    if iter_num > max_iters:
        break

if ddp:
    destroy_process_group()
