#!/usr/bin/python3
"""A user's PyTorch training script that sweep can drive: a small GRU language model
(model.kind: torch-lm) on a seeded synthetic Markov chain, one record.h5 per run.

It follows sweep's trainer contract (include/sweep/trainer.h), so a grid names it with
`launch: {trainer: PATH}` and `sweep run`, `sweep report` and `sweep reproduce` work on it:
  train.py --describe-models            its kind and keys (YAML), for the sweep driver
  train.py --config RUN.yaml --out DIR  one run: DIR/record.h5 (python/sweep_record)
Exit codes: 0 completed, 1 failed or diverged, 2 bad config or usage, 3 refused.

Keys it honours: model.vocab, model.seq_len, model.width, model.layers, model.dropout,
data.seed, data.branching, data.samples, and train.steps, micro_batch, accum, lr,
schedule, warmup, min_lr, beta1, beta2, eps, weight_decay, clip_norm, on_nan, seed,
threads, precision (fp32 only), checksum_every. It trains on one process and the CPU
(dist.world_size 1), keeps no checkpoints (train.checkpoint_every is ignored, and
--resume trains from scratch) and ignores the fault.* test keys of sweep-train.
"""
import argparse, math, os, re, resource, subprocess, sys, time

KIND = "torch-lm"
HELP = "embedding, GRU layers and a linear head (examples/pytorch-script/train.py)"
# The kind's own keys, model.<name>, as sweep's describe_models_yaml writes them.
KEYS = [("width", "int", "64", "8", "4096", "embedding and GRU hidden width"),
        ("layers", "int", "1", "1", "8", "stacked GRU layers"),
        ("dropout", "real", "0", "0", "0.9", "dropout on the GRU's input and output; masks drawn from train.seed")]


def describe_models():
    out = ["offers: [%s]" % KIND, "models:", "  - kind: " + KIND, '    help: "%s"' % HELP, "    keys:"]
    for name, typ, default, lo, hi, help_ in KEYS:
        out += ["      - name: " + name, "        type: " + typ, '        default: "%s"' % default,
                '        min: "%s"' % lo, '        max: "%s"' % hi]
        if typ == "real":
            out.append("        min_exclusive: false")
        out.append('        help: "%s"' % help_)
    return "\n".join(out) + "\n"


class ConfigError(Exception):
    pass


def unquote(v):
    """A value as sweep's to_yaml writes it: bare, or double-quoted with \\" \\\\ \\xNN escapes."""
    if not v.startswith('"'):
        return v
    if len(v) < 2 or not v.endswith('"'):
        raise ConfigError("unterminated quoted value %s" % v)
    return re.sub(r'\\(x[0-9a-fA-F]{2}|["\\])',
                  lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else m.group(1), v[1:-1])


def read_run_config(path):
    """(text, [(dotted key, value text)]) of the canonical run config sweep writes: sections
    at column 0, keys at 2, sub-maps (model.moe.*) at 4. The text is kept byte for byte: its
    XXH3-64 is the run id."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError("cannot read it: %s" % e)
    pairs, section, sub = [], None, None
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, colon, value = line.strip().partition(":")
        value = value[1:] if value.startswith(" ") else value
        if (not colon or indent not in (0, 2, 4) or (indent == 0 and value) or (indent and section is None)
                or (indent == 4 and sub is None)):
            raise ConfigError("line %d: not sweep's canonical run config (sweep writes it: runs/<id>/config.yaml)" % n)
        if indent == 0:
            section, sub = key, None
        elif indent == 2 and value == "":
            sub = key
        else:
            prefix = section + "." + (sub + "." if indent == 4 else "")
            sub = sub if indent == 4 else None
            pairs.append((prefix + key, unquote(value)))
    return text, pairs


def fail(code, message):
    print("train.py: " + message, file=sys.stderr, flush=True)
    sys.exit(code)


args = argparse.ArgumentParser(description="a PyTorch GRU language model trained under sweep's contract")
args.add_argument("--describe-models", action="store_true", help="print the kind and its keys (YAML), exit")
args.add_argument("--config", help="run config: the canonical YAML sweep writes")
args.add_argument("--out", help="run directory for record.h5")
args.add_argument("--sweep-id", default="", help="the sweep this run belongs to (recorded)")
args.add_argument("--quiet", action="store_true", help="no per-step lines")
args.add_argument("--resume", action="store_true", help="accepted; this script keeps no checkpoints and starts over")
args.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu only")
opt = args.parse_args()  # a usage error exits 2
if opt.describe_models:  # answered before torch is imported: sweep asks this once per grid
    sys.stdout.write(describe_models())
    sys.exit(0)
if not opt.config or not opt.out:
    fail(2, "error: --config and --out are required (or --describe-models); see --help")
if opt.device != "cpu":
    fail(2, "error: --device %s: this script trains on the CPU only" % opt.device)
# Everything is checked before anything is written: bad input leaves --out as it was.
try:
    config_text, pairs = read_run_config(opt.config)
    cfg = dict(pairs)
    def get(key, conv=str):
        if key not in cfg:
            raise ConfigError("key '%s' is missing" % key)
        try:
            return conv(cfg[key])
        except ValueError:
            raise ConfigError("key '%s': '%s' is not a valid %s" % (key, cfg[key], conv.__name__))
    if cfg.get("model.kind", "decoder") != KIND:  # sweep's decoder configs spell no model.kind
        raise ConfigError("model.kind '%s': this script trains %s" % (cfg.get("model.kind", "decoder"), KIND))
    if get("dist.world_size", int) != 1:
        raise ConfigError("dist.world_size %s: this script trains on one process; use 1" % cfg["dist.world_size"])
    if get("data.kind") != "synthetic":
        raise ConfigError("data.kind '%s': this script makes its own synthetic data; use synthetic" % cfg["data.kind"])
    if get("train.precision") != "fp32":
        raise ConfigError("train.precision '%s': this script trains in fp32 only" % cfg["train.precision"])
    V, L, W, LAYERS = (get("model." + k, int) for k in ("vocab", "seq_len", "width", "layers"))
    DROPOUT = get("model.dropout", float)
    DATA_SEED, BRANCHING, SAMPLES = (get("data." + k, int) for k in ("seed", "branching", "samples"))
    T = {k: get("train." + k, int) for k in ("steps", "micro_batch", "accum", "warmup", "seed", "threads", "checksum_every")}
    T.update({k: get("train." + k, float) for k in ("lr", "min_lr", "beta1", "beta2", "eps", "weight_decay", "clip_norm")})
    T["schedule"], T["on_nan"] = get("train.schedule"), get("train.on_nan")
    if not 1 <= BRANCHING <= V:
        raise ConfigError("data.branching %d: this script's chain needs 1 <= branching <= model.vocab" % BRANCHING)
except ConfigError as e:
    fail(2, "error: %s: %s" % (opt.config, e))
record_path = os.path.join(opt.out, "record.h5")
if os.path.lexists(record_path):
    fail(3, record_path + ": a completed record is already there; it is never overwritten")

# Threads: the BLAS and OpenMP pools read these when torch loads, so set them first.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(T["threads"])
import numpy as np
import torch
import torch.nn.functional as F
try:
    import sweep_record
except ImportError:  # run in place: the repository's python/ beside examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python"))
    try:
        import sweep_record
    except ImportError as e:
        fail(2, "error: cannot import sweep_record (%s); put sweep's python/ on PYTHONPATH" % e)

torch.set_num_threads(T["threads"])
torch.use_deterministic_algorithms(True)


class MarkovChain:
    """Every token has `branching` distinct successors, drawn once from data.seed; a
    sequence walks the chain with uniform choices. The best loss is ln(branching)."""

    def __init__(self, seed, vocab, branching):
        rng = np.random.Generator(np.random.PCG64([seed, 0]))
        self.seed = seed
        self.next = np.stack([rng.choice(vocab, size=branching, replace=False) for _ in range(vocab)])

    def sequence(self, sample, length):  # a pure function of (data.seed, sample)
        rng = np.random.Generator(np.random.PCG64([self.seed, 1, sample]))
        choice = rng.integers(0, self.next.shape[1], size=length)
        out = np.empty(length, dtype=np.int64)
        out[0] = rng.integers(0, self.next.shape[0])
        for i in range(1, length):
            out[i] = self.next[out[i - 1], choice[i]]
        return out


def batch(chain, first, count):
    """Sequences `first`..`first + count - 1` of the stream, [count, L + 1]. Epoch e visits
    the data.samples samples in a permutation drawn from (data.seed, e)."""
    rows = []
    for g in range(first, first + count):
        epoch, i = divmod(g, SAMPLES)
        if batch.epoch != epoch:
            batch.order = np.random.Generator(np.random.PCG64([DATA_SEED, 2, epoch])).permutation(SAMPLES)
            batch.epoch = epoch
        rows.append(chain.sequence(int(batch.order[i]), L + 1))
    return torch.from_numpy(np.stack(rows))
batch.epoch = None


class GruLm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, W)
        self.gru = torch.nn.GRU(W, W, num_layers=LAYERS, batch_first=True, dropout=DROPOUT if LAYERS > 1 else 0.0)
        self.head = torch.nn.Linear(W, V)

    def forward(self, x):  # [B, L] token ids -> [B, L, V] logits
        h, _ = self.gru(F.dropout(self.embed(x), DROPOUT, self.training))
        return self.head(F.dropout(h, DROPOUT, self.training))


def learning_rate(step):  # sweep-train's schedule (trainer/numerics/optimizer.cpp)
    if T["warmup"] > 0 and step <= T["warmup"]:
        return T["lr"] * step / T["warmup"]
    if T["schedule"] == "constant" or T["steps"] == T["warmup"]:
        return T["lr"]
    progress = (step - T["warmup"]) / (T["steps"] - T["warmup"])
    if T["schedule"] == "linear":
        return T["min_lr"] + (T["lr"] - T["min_lr"]) * (1.0 - progress)
    return T["min_lr"] + 0.5 * (T["lr"] - T["min_lr"]) * (1.0 + math.cos(math.pi * progress))


def git(*cmd):  # what the repository says about this script; empty outside one
    try:
        return subprocess.run(["git", "-C", os.path.dirname(os.path.realpath(__file__))] + list(cmd),
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# The seeds: train.seed draws the initial parameters and the dropout masks (the global
# generator), data.seed the chain and the data order (numpy generators of their own).
torch.manual_seed(T["seed"])
model = GruLm()
model.train()
chain = MarkovChain(DATA_SEED, V, BRANCHING)
optimizer = torch.optim.AdamW(model.parameters(), lr=T["lr"], betas=(T["beta1"], T["beta2"]), eps=T["eps"],
                              weight_decay=T["weight_decay"])  # decays every parameter, as sweep-train does
named = lambda: [(n, p.detach().numpy()) for n, p in model.named_parameters()]
environment = {
    "trainer": os.path.abspath(__file__), "trainer.models": KIND, "device": "cpu", "world_size": "1",
    "torch_threads": str(torch.get_num_threads()), "blas_threads": str(T["threads"]), "precision.cpu": "fp32",
    "blas": "; ".join(re.findall(r"BLAS_INFO=\w+|CPU capability usage: \w+", torch.__config__.show())),
    "deterministic_algorithms": "1" if torch.are_deterministic_algorithms_enabled() else "0",
    "data.entropy_floor": repr(math.log(BRANCHING)), "data.source": "torch-lm Markov chain (%d sequences)" % SAMPLES,
}
environment["git_commit"] = git("rev-parse", "HEAD")
if environment["git_commit"]:  # "1": the script differs from that commit
    environment["git_dirty"] = "1" if git("status", "--porcelain", "--", os.path.realpath(__file__)) else "0"
try:
    rec = sweep_record.RecordWriter(opt.out, run_id=sweep_record.run_id_of(config_text), config_yaml=config_text,
                                    config=pairs, environment=environment, sweep_id=opt.sweep_id,
                                    params=[(n, p.shape) for n, p in model.named_parameters()])
except sweep_record.RecordError as e:  # another process holds the run, or a link is in the way
    fail(3, str(e))

tokens = T["micro_batch"] * T["accum"] * L  # targets per optimizer step


def train(rec):
    """The loop: returns (status, why, step times, last loss). Every step's row and
    checksums go to `rec`; sweep compares re-runs by these, bit for bit."""
    times, skipped_total, loss = [], 0, float("nan")
    rec.append_checksum(0, *sweep_record.checksums_of(named()))  # the initial parameters
    for step in range(1, T["steps"] + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        loss = 0.0
        for k in range(T["accum"]):  # gradient accumulation: the token mean over the whole step
            seq = batch(chain, ((step - 1) * T["accum"] + k) * T["micro_batch"], T["micro_batch"])
            logits = model(seq[:, :-1])
            loss_sum = F.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1), reduction="sum")
            (loss_sum / tokens).backward()
            loss += loss_sum.item()
        loss /= tokens
        grads = [p.grad for p in model.parameters()]
        grad_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        clip_coef = 1.0
        if T["clip_norm"] > 0 and grad_norm > T["clip_norm"]:  # sweep-train's clip (0 = off)
            clip_coef = T["clip_norm"] / (grad_norm + 1e-6)
            for g in grads:
                g.mul_(clip_coef)
        lr = learning_rate(step)
        finite = math.isfinite(loss) and math.isfinite(grad_norm)
        if finite:  # train.on_nan: skip_step drops a non-finite step's update, stop ends the run
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
        skipped_total += 0 if finite else 1
        step_time = time.perf_counter() - start
        times.append(step_time)
        stop = not finite and T["on_nan"] == "stop"
        checksums = None  # the parameters after this step's update, hashed (and timed) now
        if not stop and (step % T["checksum_every"] == 0 or step == T["steps"]):
            checksums = sweep_record.checksums_of(named())
        rec.append_step(step=step, loss=loss, lr=lr, grad_norm=grad_norm, clip_coef=clip_coef, tokens=tokens,
                        skipped=0 if finite else 1, loss_scale=1.0, step_time_s=step_time,
                        tokens_per_s=tokens / step_time, record_time_s=time.perf_counter() - start - step_time)
        rec.append_rank_times([step_time])
        if checksums:
            rec.append_checksum(step, *checksums)
        if not opt.quiet:
            print("step %d loss %.6f" % (step, loss), flush=True)
        if stop:
            return "diverged", "non-finite loss or gradient at step %d (train.on_nan: stop)" % step, times, loss
    param_bytes = sum(p.numel() for p in model.parameters()) * 4
    state_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values() if t.dim())
    rec.set_memory([param_bytes], [param_bytes], [state_bytes],
                   peak_rss=[resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024])
    rec.set_summary("nonfinite_steps_skipped", str(skipped_total))
    rec.set_summary("rank_compute_median_s", "%.6f" % float(np.median(times)))
    rec.set_summary("stragglers", "")
    return "completed", "", times, loss


try:
    with rec:  # an exception inside leaves record.h5.partial, marked failed with the cause
        status, why, times, loss = train(rec)
        rec.finish(status, why)
except Exception as e:
    fail(1, "run failed: %s: %s" % (type(e).__name__, e))
if not opt.quiet:
    print("%s: %d steps, final loss %.6f; %s" % (status, len(times), loss, record_path), flush=True)
if status != "completed":
    fail(1, "run diverged: " + why)
