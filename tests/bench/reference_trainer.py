#!/usr/bin/python3
"""A PyTorch eager reference of sweep-train's model and step (same shapes, same ops:
RMSNorm, rotary attention, SwiGLU, untied head, AdamW, micro-batch accumulation), used
only as a speed yardstick. Prints "step N" (flushed) when step N is done, like
sweep-train's log lines, so that train_bench.py times both programs the same way: by the
wall clock between two of those lines. It does not time itself; on a GPU it synchronizes
before the lines of steps WARMUP and STEPS, the two ends of train_bench's window.

Usage: reference_trainer.py LAYERS D_MODEL HEADS VOCAB SEQ MICRO_BATCH ACCUM STEPS WARMUP THREADS [DEVICE]
DEVICE: cpu (default) or cuda (TF32 off, as sweep-train runs it).
"""
import math
import os
import sys

layers, d, heads, vocab, seq, mb, accum, steps, warm, threads = map(int, sys.argv[1:11])
device = sys.argv[11] if len(sys.argv) > 11 else "cpu"
# Debian's PyTorch calls the system OpenBLAS, whose own thread pool torch.set_num_threads
# does not limit: without these it uses every core and the comparison is not like for like.
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)

import torch  # noqa: E402  (after the thread settings, which OpenBLAS reads at load time)
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(threads)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
hidden = (4 * d * 2 // 3 + 7) // 8 * 8
hd = d // heads


def param(*shape, std=0.02):
    return torch.nn.Parameter(torch.randn(*shape) * std)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = param(vocab, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.attn_norm = torch.nn.Parameter(torch.ones(d))
            b.wq, b.wk, b.wv, b.wo = param(d, d), param(d, d), param(d, d), param(d, d)
            b.mlp_norm = torch.nn.Parameter(torch.ones(d))
            b.w1, b.w3, b.w2 = param(hidden, d), param(hidden, d), param(d, hidden)
            self.blocks.append(b)
        self.final_norm = torch.nn.Parameter(torch.ones(d))
        self.head = param(vocab, d)
        inv = 10000.0 ** (-torch.arange(0, hd // 2, dtype=torch.float64) * 2.0 / hd)
        ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
        self.register_buffer("cos", torch.cos(ang).float())
        self.register_buffer("sin", torch.sin(ang).float())
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def rope(self, x):
        h = x.size(-1) // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], -1)

    def forward(self, tokens):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        B, L = inp.shape
        x = F.embedding(inp, self.embed)
        for b in self.blocks:
            h = self.norm(x, b.attn_norm)
            q, k, v = (F.linear(h, w).view(B, L, heads, hd).transpose(1, 2) for w in (b.wq, b.wk, b.wv))
            q, k = self.rope(q), self.rope(k)
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + self.mask
            a = torch.matmul(torch.softmax(s, -1), v).transpose(1, 2).reshape(B, L, d)
            x = x + F.linear(a, b.wo)
            m = self.norm(x, b.mlp_norm)
            x = x + F.linear(F.silu(F.linear(m, b.w1)) * F.linear(m, b.w3), b.w2)
        logits = F.linear(self.norm(x, self.final_norm), self.head)
        return F.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1), reduction="sum")


def sync():
    if device != "cpu":
        torch.cuda.synchronize()


model = Model().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
tokens_per_step = mb * accum * seq
data = torch.randint(0, vocab, (steps * accum, mb, seq + 1)).to(device)
for step in range(1, steps + 1):
    opt.zero_grad(set_to_none=False)
    for k in range(accum):
        loss = model(data[(step - 1) * accum + k]) / tokens_per_step
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step == warm or step == steps:
        sync()  # the window's two ends: the GPU's queued work belongs before the line
    print(f"step {step}", flush=True)
