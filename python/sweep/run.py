"""sweep.init(): a training script's run, in the spirit of wandb.init() and Optuna's trial.

A script adopts it in a few lines and still runs unchanged outside sweep:

    import sweep
    args = parser.parse_args()
    run = sweep.init(args, keys={"lr": "train.lr", "steps": "train.steps", "seed": "train.seed"})
    run.watch(model)                      # parameter checksums: step 0, every N steps, the end
    for step in range(1, args.steps + 1):
        ...
        run.log(step, loss=loss, lr=lr, grad_norm=norm, tokens=n, accuracy=acc)
        if step % 50 == 0:
            run.eval(step, loss=eval_loss, tokens=eval_tokens, accuracy=eval_acc)
    run.finish()

Under `sweep run` (a grid's `program:` section) the settings the grid sets come from the
run's config: each name of `args` is the config key `keys[name]`, else `model.<name>` (the
program's own keys), else its alias (ALIASES), typed like the script's default; every other
setting keeps the script's value, and the record holds it. The record goes to the run directory, written by
rank 0 only (RANK), its rows flushed every few seconds so `sweep status` and the live
report follow the run. Outside sweep nothing changes: `args` keep their values, and a
record is written only when `out=` names a directory.

Everything the record holds is in results/SCHEMA.md; the low-level writer this builds on
is sweep_record.RecordWriter.
"""

import atexit
import math
import os
import re
import sys
import time

import numpy as np

import sweep_record
from sweep_record import RecordError, checksums_of, run_id_of

__all__ = ["Run", "init"]

#: What training scripts call sweep's built-in keys (argparse dests, nanoGPT's and Hugging
#: Face's names): a setting of that name is the key unless the program declares a key of
#: its own by the name (model.<name>) or `keys=` says otherwise.
ALIASES = {
    "steps": "train.steps", "max_iters": "train.steps", "iters": "train.steps", "max_steps": "train.steps",
    "num_steps": "train.steps", "lr": "train.lr", "learning_rate": "train.lr", "min_lr": "train.min_lr",
    "batch_size": "train.micro_batch", "micro_batch": "train.micro_batch", "accum": "train.accum",
    "grad_accum": "train.accum", "gradient_accumulation_steps": "train.accum", "seed": "train.seed",
    "warmup": "train.warmup", "warmup_iters": "train.warmup", "warmup_steps": "train.warmup",
    "weight_decay": "train.weight_decay", "beta1": "train.beta1", "beta2": "train.beta2",
    "clip": "train.clip_norm", "clip_norm": "train.clip_norm", "grad_clip": "train.clip_norm",
    "max_grad_norm": "train.clip_norm", "eval_every": "train.eval_every", "eval_interval": "train.eval_every",
    "threads": "train.threads", "seq_len": "model.seq_len", "block_size": "model.seq_len",
    "vocab": "model.vocab", "vocab_size": "model.vocab",
}

#: The step metrics a record keeps in its own columns; anything else is a custom metric.
_BUILTIN = frozenset(sweep_record.STEP_FIELDS) - {"step"}


#: The loss_spike rule of sweep's readers and sweep-train (results/analysis/run_health.h):
#: a finite value above the median of the last 20 finite values before it (at least 10) by
#: more than 6 robust standard deviations (1.4826 x their median absolute deviation) and by
#: more than 20% of that median.
_SPIKE_WINDOW, _SPIKE_MIN_HISTORY, _SPIKE_SIGMAS, _SPIKE_RISE = 20, 10, 6.0, 0.2


def _median(values):
    v = sorted(values)
    h = len(v) // 2
    return v[h] if len(v) % 2 else 0.5 * (v[h - 1] + v[h])


def _spikes(window, value):
    """`value` spiked against `window`, the finite values before it (oldest first)."""
    if not math.isfinite(value) or len(window) < _SPIKE_MIN_HISTORY:
        return False
    middle = _median(window)
    sigma = 1.4826 * _median([abs(x - middle) for x in window])
    rise = value - middle
    return rise > _SPIKE_SIGMAS * sigma and rise > _SPIKE_RISE * abs(middle)


def _push_finite(window, value):
    if math.isfinite(value):
        window.append(value)
        del window[:-_SPIKE_WINDOW]


def _env_int(*names, default=0):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                pass
    return default


def _unquote(v):
    """A value as sweep's canonical YAML writes it: bare, or double-quoted with escapes."""
    if not v.startswith('"'):
        return v
    return re.sub(r'\\(x[0-9a-fA-F]{2}|["\\])',
                  lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else m.group(1), v[1:-1])


def read_config(path):
    """(text, [(dotted key, value text)]) of the canonical run config sweep writes: sections
    at column 0, keys at 2, sub-maps (model.moe.*) at 4. The text is kept byte for byte:
    its XXH3-64 is the run id."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    pairs, section, sub = [], None, None
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, colon, value = line.strip().partition(":")
        value = value[1:] if value.startswith(" ") else value
        if not colon or indent not in (0, 2, 4) or (indent and section is None):
            raise RecordError(f"{path}:{n}: not sweep's canonical run config")
        if indent == 0:
            section, sub = key, None
        elif indent == 2 and value == "":
            sub = key
        else:
            prefix = section + "." + (sub + "." if indent == 4 and sub else "")
            pairs.append((prefix + key, _unquote(value)))
    return text, pairs


def _declared_types():
    """The program's own keys and their types, from SWEEP_PROGRAM_KEYS (describe_models YAML)."""
    types, name = {}, None
    for line in os.environ.get("SWEEP_PROGRAM_KEYS", "").splitlines():
        s = line.strip()
        if s.startswith("- name: "):
            name = s[len("- name: "):].strip()
        elif s.startswith("type: ") and name:
            types["model." + name] = s[len("type: "):].strip()
    return types


def _typed(text, like=None, declared=None):
    """A canonical value as the script's default is typed (bool, int, float, str), else as
    its declared type, else as it reads (a whole number, a real, true/false, text)."""
    if isinstance(like, bool) or (like is None and declared is None and text in ("true", "false")):
        if text not in ("true", "false"):
            raise ValueError(f"'{text}' is not true or false")
        return text == "true"
    if isinstance(like, int) or declared == "int":
        return int(text)
    if isinstance(like, float) or declared == "real":
        return float(text)
    if isinstance(like, str) or declared == "choice":
        return text
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _canonical(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_.+/-]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _config_text(pairs):
    """A canonical config text of (dotted key, value) pairs, for a run outside sweep: sections
    and keys sorted, one level deep (its hash names the run)."""
    sections = {}
    for key, value in pairs:
        section, _, name = key.partition(".")
        sections.setdefault(section, []).append((name, _canonical(value)))
    out = []
    for section in sorted(sections):
        out.append(section + ":")
        out += ["  %s: %s" % kv for kv in sorted(sections[section])]
    return "\n".join(out) + "\n"


#: Settings that name where a script writes (nanoGPT's out_dir, Hugging Face's
#: output_dir): under sweep the run's directory, the one place a run may write.
_RUN_DIR_NAMES = ("out_dir", "output_dir")

#: The keys sweep.init and sweep itself act on: a grid may set them without the script
#: having a setting of that name.
_SWEEP_OWN = {"dist.world_size", "train.threads", "train.checksum_every", "train.telemetry_every", "train.log_every",
              "data.kind", "train.deterministic"}


def _conventions():
    """The grid's program.accum and program.steps (SWEEP_PROGRAM_CONVENTIONS)."""
    out = {"accum": "per_rank", "steps": "count"}
    for item in os.environ.get("SWEEP_PROGRAM_CONVENTIONS", "").split():
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _scalar(value):
    return isinstance(value, (bool, int, float, str))


def _to_script(key, value, conventions, world):
    """A config value as the script names it: a global accumulation count (program.accum:
    global) is train.accum x the world size; a last iteration counted from 0
    (program.steps: plus_one) is train.steps - 1."""
    if key == "train.accum" and conventions.get("accum") == "global":
        return type(value)(value * world)
    if key == "train.steps" and conventions.get("steps") == "plus_one":
        return type(value)(value - 1)
    return value


def _from_script(key, value, conventions, world):
    """A script's own default as sweep names it (the inverse of _to_script)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if key == "train.accum" and conventions.get("accum") == "global" and value % world == 0:
        return type(value)(value // world)
    if key == "train.steps" and conventions.get("steps") == "plus_one":
        return type(value)(value + 1)
    return value


def _named_params(model):
    """(name, tensor) of a module's parameters, or the (name, tensor) pairs given."""
    return list(model.named_parameters() if hasattr(model, "named_parameters") else model)


def _step_norm(params):
    """The gradient norm of `params` for the spike rule on a step that takes no row: torch's
    own per-tensor norms (one torch._foreach_norm), their squares added in float64. The same
    bits for the same gradient and thread count, as the script's own gradient; a row's norms
    are tensor_grad_norms', which no thread count changes (pass grad_norm= for a per-step
    norm free of it too). A step costs a few tensor operations, not a few per tensor."""
    import torch  # the script has it already
    grads = [p.grad for p in params if p.grad is not None and p.grad.numel()]
    if not grads:
        return 0.0
    if hasattr(torch, "_foreach_norm"):
        values = torch.stack(torch._foreach_norm(grads)).tolist()
    else:
        values = [torch.linalg.vector_norm(g).item() for g in grads]
    return math.sqrt(math.fsum(x * x for x in values))


def _named_f32(model):
    """(name, float32 array) of a module's parameters (or of (name, tensor) pairs) in order;
    a parameter of another dtype is hashed as its float32 values."""
    out = []
    for name, t in _named_params(model):
        if hasattr(t, "detach"):  # a torch tensor
            t = t.detach().cpu()
            t = (t if str(t.dtype) == "torch.float32" else t.float()).numpy()
        out.append((name, np.ascontiguousarray(t, dtype=np.float32)))
    return out


def _runqueue_wait_s():
    """How long the calling thread has been ready to run but waited for a CPU (s), from the
    kernel's schedstat; None where the kernel keeps none."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class Run:
    """One run of a training script. Create it with sweep.init()."""

    def __init__(self, settings, keys, out, flush_every_s, environment):
        self.under_sweep = bool(os.environ.get("SWEEP_RUN_DIR") and os.environ.get("SWEEP_CONFIG"))
        self.rank = _env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
        self.world_size = max(1, _env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", default=1))
        self.local_rank = _env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
        self._flush_every_s = float(flush_every_s)
        self._environment = dict(environment or {})
        self._writer = None
        self._finished = False
        self._last_step = 0
        self._last_log = time.perf_counter()
        # Shared cores: the run-queue wait of the thread that calls log(), over the time
        # between its calls (summary rank_runqueue_share, rank 0's alone).
        self._last_wait = None
        self._waited_s = 0.0
        self._waited_over_s = 0.0
        self._summary_keys = set()
        self._timing = set()  # declare_timing's names, given to the writer when it opens
        self._last_flush = time.monotonic()
        self._flushed_once = False
        self._model = None
        self._checksum_every = None
        self._checksummed = set()
        self._carried = None  # rows of an earlier attempt, re-recorded on a resume
        self.resumed_from = 0
        # Gradient telemetry (gradients()): the last step it saw, the finite losses and
        # gradient norms before it (the spike windows), this step's rank norms until log().
        self._telemetry_every = None
        self._grad_step = 0
        self._loss_window, self._norm_window = [], []
        self._rank_norms = None
        self._grad_params = None  # (model, its parameters): gradients() reads their .grad
        #: (step, why, tensor norms) of the last telemetry row gradients() took, or None;
        #: the gradient norm gradients() last judged (given, or computed from the tensors).
        self.last_telemetry = None
        self.last_grad_norm = None
        keys = dict(keys or {})
        names = settings if isinstance(settings, dict) else vars(settings) if settings is not None else {}
        if self.under_sweep:
            self.dir = os.environ["SWEEP_RUN_DIR"]
            self._config_text, pairs = read_config(os.environ["SWEEP_CONFIG"])
            self.id = os.environ.get("SWEEP_RUN_ID") or run_id_of(self._config_text)
            given = dict(pairs)
            declared = _declared_types()
            typed = {}
            for k, v in pairs:
                try:
                    typed[k] = _typed(v, declared=declared.get(k))
                except ValueError:
                    typed[k] = v
            conventions = _conventions()
            world = int(given.get("dist.world_size", "1"))
            own = []  # (key, value) the script keeps: the grid does not set its key
            taken = set()
            for name, default in list(names.items()):
                key = keys.get(name) or ("model." + name if "model." + name in given else ALIASES.get(name))
                if key is None:
                    continue
                taken.add(key)
                if key not in given:
                    if default is not None and key not in typed and _scalar(default):
                        value = _from_script(key, default, conventions, world)
                        own.append((key, value))
                        typed[key] = value
                    continue
                try:
                    value = _typed(given[key], like=default, declared=declared.get(key))
                except ValueError as e:
                    raise ValueError(f"sweep.init: {name} (config key {key}): {e}") from None
                typed[key] = value
                names[name] = _to_script(key, value, conventions, world)
            for name in _RUN_DIR_NAMES:  # where the script writes: its run directory, as confined
                if isinstance(names.get(name), str) and name not in keys:
                    names[name] = self.dir
            self.config = typed
            # The record holds what ran: the grid's keys as given, then the script's own
            # defaults of the keys the grid left to it (not part of the run id).
            self._pairs = pairs + [(k, _canonical(v).strip('"')) for k, v in own]
            self.script_defaults = [k for k, _ in own]
            if names and self.rank == 0:
                unused = [k for k, _ in pairs if k not in taken and k not in _SWEEP_OWN and not k.startswith("model.")]
                if unused:
                    print("sweep.init: warning: the grid sets %s, which no setting of this script takes (name the "
                          "setting in keys=, or leave the key out of the grid)" % ", ".join(unused),
                          file=sys.stderr, flush=True)
        else:
            self.script_defaults = []
            self.dir = os.fspath(out) if out is not None else None
            pairs = [(keys.get(n) or ALIASES.get(n) or "model." + n, v) for n, v in names.items() if v is not None]
            self.config = dict(pairs)
            self._config_text = _config_text(pairs)
            self._pairs = [(k, _canonical(v).strip('"')) for k, v in pairs]
            self.id = run_id_of(self._config_text)
        if isinstance(settings, dict):
            settings.update(names)
        self.seed = self.config.get("train.seed", 0)
        self.checkpoint_dir = os.path.join(self.dir, "checkpoints") if self.dir else None
        self._stop_at = self._read_stop_at()
        self.writes = self.rank == 0 and self.dir is not None
        self._uncaught = ""
        if self.writes:
            atexit.register(self._at_exit)
            # An exception that ends the script is the run's failure, in its record.
            previous = sys.excepthook

            def hook(kind, value, tb):
                self._uncaught = f"{kind.__name__}: {value}" if str(value) else kind.__name__
                previous(kind, value, tb)
            sys.excepthook = hook

    # ------------------------------------------------------------------ identity

    def _read_stop_at(self):
        """The step a halving search asked this run to stop after (run_dir/stop_at), or 0."""
        if not self.under_sweep:
            return 0
        path = os.path.join(self.dir, "stop_at")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return 0
        if not text.isdigit() or int(text) < 1:
            raise RecordError(f"{path}: '{text[:40]}' is not a step number")
        return int(text)

    def should_stop(self, step):
        """True once `step` is the one a halving search asked this run to stop after: save a
        checkpoint (save()) and finish("stopped")."""
        return self._stop_at > 0 and step >= self._stop_at

    # ------------------------------------------------------------------ the record

    def _open(self, params=()):
        if self._writer is not None or not self.writes:
            return
        env = {"world_size": str(self.world_size), "trainer.models": self.config.get("model.kind", "")}
        if self.script_defaults:  # keys the grid left to the script: their values are its own defaults
            env["program.script_defaults"] = " ".join(self.script_defaults)
        env.update(self._environment)
        self._writer = sweep_record.RecordWriter(
            self.dir, run_id=self.id, config_yaml=self._config_text, config=self._pairs, environment=env,
            sweep_id=os.environ.get("SWEEP_ID", ""), params=params, world_size=self.world_size)
        if self._timing:
            self._writer.declare_timing(*sorted(self._timing))
        if self._carried:
            self._replay(self._carried)

    def watch(self, model, every=None, telemetry_every=None):
        """Checksums of `model`'s parameters (an nn.Module, or (name, tensor) pairs) at step 0,
        every `every` steps (default: the config's train.checksum_every, else 10) and at the
        last step, so `sweep compare` and `reproduce` compare the final parameters too.
        `telemetry_every`: gradients()'s period (default: train.telemetry_every, else 10)."""
        self._model = model
        self._checksum_every = int(every or self.config.get("train.checksum_every", 10) or 10)
        if telemetry_every is not None:
            self._telemetry_every = int(telemetry_every)
        named = _named_f32(model)
        self._open([(n, a.shape) for n, a in named])
        if self._writer is not None and self.resumed_from == 0:
            self._writer.append_checksum(0, *checksums_of(named))
            self._checksummed.add(0)

    def checksum(self, step, model=None):
        """Parameter checksums after `step`'s update now (the watched model by default)."""
        model = model if model is not None else self._model
        if model is None:
            raise ValueError("checksum: no model; pass one or call watch(model) first")
        if not self.writes or step in self._checksummed:
            return
        named = _named_f32(model)
        self._open([(n, a.shape) for n, a in named])
        self._writer.append_checksum(step, *checksums_of(named))
        self._checksummed.add(step)

    def _params_of(self, source):
        """The parameters of `source` whose .grad gradients() reads, the list kept per model:
        named_parameters() costs more than a small model's norms."""
        if source is None:
            raise ValueError("gradients: no model; pass one or call watch(model) first")
        if self._grad_params is None or self._grad_params[0] is not source:
            self._grad_params = (source, [p for _, p in _named_params(source)])
        return self._grad_params[1]

    def gradients(self, step, loss, model=None, *, grad_norm=None, tensor_norms=None, rank_norms=None):
        """Gradient telemetry for `step`, taken as sweep-train takes it (results/SCHEMA.md,
        /telemetry): call it once the step's gradient is complete (after backward() and any
        all-reduce) and before it is clipped or applied. A row of each parameter tensor's
        gradient norm goes to the record every train.telemetry_every steps (10; watch()'s
        telemetry_every), at the last step (train.steps), and at a step whose loss or
        gradient norm spiked against the steps before it (the loss_spike rule) or is not
        finite; the loss_spike flag of `sweep show` and the report then names the tensors
        whose norms rose most, and a non-finite row shows which tensors went inf or NaN.

        `loss`: the step's loss (a float or a 0-dim tensor); under torch.distributed pass the
        global batch's, so every rank decides alike. `model`: whose .grad to read (default:
        the watched model; its parameters in named_parameters() order, None counting 0).
        `grad_norm`: the step's gradient norm before clipping, when the script has it; else
        the spike rule reads torch's norm of the gradient (one torch._foreach_norm: the bits
        of the same gradient and thread count, as the gradient's own; from `tensor_norms`
        when given), and the blocked norms are computed only for a row. `tensor_norms`: the
        norms themselves (a list, or a function giving it, called only for a row), e.g.
        sweep.invariant's CanonicalGradients.tensor_grad_norms. `rank_norms`: each rank's
        own gradient norm before the reduction (world_size values;
        CanonicalGradients.rank_grad_norms), for /ranks/grad_norm, written with the step's
        log().

        The norms the module computes have the same bits on every layout when the gradient
        has (sweep.invariant): each tensor is reduced in 4,096-element blocks. Returns why a
        row was taken ("every", "last", "spike", "nonfinite", comma-separated) or ""."""
        step = int(step)
        if step <= self._grad_step:
            raise ValueError(f"gradients: step {step} after step {self._grad_step}; once per step, in step order")
        loss = float(loss)
        source = model if model is not None else self._model
        taken = []

        def norms():
            if not taken:
                if tensor_norms is not None:
                    values = tensor_norms() if callable(tensor_norms) else tensor_norms
                else:
                    from .invariant import tensor_grad_norms  # torch: the script has it already
                    values = tensor_grad_norms([p.grad for p in self._params_of(source)])
                taken.append([float(x) for x in values])
            return taken[0]

        if grad_norm is not None:
            norm = float(grad_norm)
        elif tensor_norms is not None:
            norm = math.sqrt(math.fsum(x * x for x in norms()))
        else:
            norm = _step_norm(self._params_of(source))
        self.last_grad_norm = norm
        every = self._telemetry_every
        if every is None:
            every = int(self.config.get("train.telemetry_every", 10) or 0)
        why = []
        if every > 0 and step % every == 0:
            why.append("every")
        if step == int(self.config.get("train.steps", 0) or 0):
            why.append("last")
        if _spikes(self._loss_window, loss) or _spikes(self._norm_window, norm):
            why.append("spike")
        if not math.isfinite(loss) or not math.isfinite(norm):
            why.append("nonfinite")
        why = ",".join(why)
        _push_finite(self._loss_window, loss)
        _push_finite(self._norm_window, norm)
        self._grad_step = step
        if rank_norms is not None:
            rank_norms = [float(x) for x in rank_norms]
            if len(rank_norms) != self.world_size:
                raise ValueError(f"gradients: {len(rank_norms)} rank norms for a world of {self.world_size}")
        if not self.writes:
            return why
        if why:
            row = norms()
            if self._writer is None and source is not None:
                self._open([(n, tuple(p.shape)) for n, p in _named_params(source)])
            self._open()
            if len(row) != self._writer.n_tensors:
                raise ValueError(f"gradients: {len(row)} tensor norms, but the record's parameter table has "
                                 f"{self._writer.n_tensors} (call watch(model) before the first log())")
            self._writer.append_telemetry(step, why, row)
            self.last_telemetry = (step, why, row)
        if rank_norms is not None:
            self._rank_norms = (step, rank_norms)
            if self._last_step >= step:  # log() came first
                self._append_rank_norms(step)
        return why

    def first_nonfinite_module(self, forward, model=None, *, step=None, sample_ids=None):
        """Where a non-finite forward went non-finite, as sweep-train names it: calls
        `forward()` (the bad micro-batch's forward, e.g. `lambda: model(x, y)`) once under
        torch.no_grad() with a forward hook on every submodule of `model` (default: the
        watched model), removed again before it returns, and names the first module, in the
        order modules finish, whose floating-point output held a non-finite value: "first
        non-finite module: blocks.0.attn.proj (its output non-finite for rows 1, 3; its input:
        min -2.5, max 3.25, mean 0.01, absmax 3.25, 0 of 512 non-finite)". `sample_ids`:
        the batch rows' sample ids (row i is sample sample_ids[i]), named instead of rows.
        Only this call pays for the hooks: run it on the step whose loss was not finite, as
        sweep-train does, not on every step. With `step`, the sentence also goes to the
        record's /summary as `first_nonfinite_module` ("step S: ..."). Returns "" when every
        module's output was finite (the step's non-finite value came after the forward)."""
        import torch  # the script has it already

        source = model if model is not None else self._model
        if source is None:
            raise ValueError("first_nonfinite_module: no model (pass model= or call watch(model) first)")
        found = []

        def first_tensor(value):
            if torch.is_tensor(value):
                return value
            if isinstance(value, (tuple, list)):
                for v in value:
                    t = first_tensor(v)
                    if t is not None:
                        return t
            return None

        def hook_for(name):
            def hook(module, inputs, output):
                out = first_tensor(output)
                if found or out is None or not out.is_floating_point() or out.dim() == 0:
                    return
                bad = ~torch.isfinite(out.detach().float()).reshape(out.shape[0], -1).all(dim=1)
                if not bool(bad.any()):
                    return
                rows = [int(r) for r in bad.nonzero().reshape(-1).tolist()]
                x = first_tensor(inputs)
                x = x.detach().to(torch.float64).reshape(-1) if x is not None else torch.zeros(0, dtype=torch.float64)
                finite = x[torch.isfinite(x)]
                stats = [float(finite.min()), float(finite.max()), float(finite.mean()),
                         float(finite.abs().max())] if finite.numel() else [0.0] * 4
                found.append((name, rows, stats, x.numel() - finite.numel(), x.numel()))
            return hook

        handles = [m.register_forward_hook(hook_for(name)) for name, m in source.named_modules() if name]
        try:
            with torch.no_grad():
                forward()
        finally:
            for h in handles:
                h.remove()
        if not found:
            return ""
        name, rows, (lo, hi, mean, absmax), bad_in, numel = found[0]
        if sample_ids is not None:
            ids = [str(sample_ids[r]) if r < len(sample_ids) else "row %d" % r for r in rows]
            where = "sample%s %s" % ("" if len(ids) == 1 else "s", ", ".join(ids))
        else:
            where = "row%s %s" % ("" if len(rows) == 1 else "s", ", ".join(str(r) for r in rows))
        text = ("first non-finite module: %s (its output non-finite for %s; its input: min %r, max %r, mean %r, "
                "absmax %r, %d of %d non-finite)" % (name, where, lo, hi, mean, absmax, bad_in, numel))
        if step is not None:
            self.summary("first_nonfinite_module", "step %d: %s" % (int(step), text))
        return text

    def _append_rank_norms(self, step):
        if self._rank_norms is not None and self._rank_norms[0] == step:
            self._writer.append_rank_grad_norms(self._rank_norms[1])
            self._rank_norms = None

    def clip_grad_norm_(self, step, loss, max_norm, model=None, *, rank_norms=None):
        """torch.nn.utils.clip_grad_norm_(parameters, max_norm) with gradients()'s telemetry
        in the same pass: the gradient norm torch's clip computes (the same bits) is the
        step's norm for the spike rule, a row due this step is taken before the gradient is
        scaled, then it is scaled as torch's clip scales it (the same bits). Returns that
        norm, before clipping, as a float. For a script that clips, telemetry then costs no
        second pass over the gradient on the steps without a row. `max_norm`: float("inf")
        measures without clipping."""
        import torch  # the script has it already
        source = model if model is not None else self._model
        grads = [p.grad for p in self._params_of(source) if p.grad is not None]
        max_norm = float(max_norm)
        if not grads:
            self.gradients(step, loss, source, grad_norm=0.0, rank_norms=rank_norms)
            return 0.0
        utils = torch.nn.utils
        if hasattr(utils, "get_total_norm"):  # torch 2.6 and later: the clip's own pieces
            total = utils.get_total_norm(grads, 2.0)
        else:  # torch.nn.utils.clip_grad_norm_ of torch 1.13 to 2.5, for the 2-norm
            device = grads[0].device
            total = torch.norm(torch.stack([torch.norm(g.detach(), 2.0).to(device) for g in grads]), 2.0)
        norm = total.item()
        self.gradients(step, loss, source, grad_norm=norm, rank_norms=rank_norms)
        if hasattr(utils, "clip_grads_with_norm_"):
            utils.clip_grads_with_norm_(grads, max_norm, total)
        else:
            coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
            for g in grads:
                g.detach().mul_(coef.to(g.device))
        return norm

    def log(self, step, loss, **metrics):
        """One optimizer step: its loss and any of lr, grad_norm, clip_coef, loss_scale,
        skipped, tokens, step_time_s (default: the time since the last log()), plus any
        metrics of your own (accuracy=..., mfu=...: one real number each)."""
        now = time.perf_counter()
        step = int(step)
        if step <= self._last_step:
            raise ValueError(f"log: step {step} after step {self._last_step}; steps are 1-based and increase")
        fields = {k: metrics.pop(k) for k in list(metrics) if k in _BUILTIN}
        fields.setdefault("step_time_s", now - self._last_log)
        if fields.get("tokens") and fields["step_time_s"] > 0:
            fields.setdefault("tokens_per_s", fields["tokens"] / fields["step_time_s"])
        if self.writes:
            wait = _runqueue_wait_s()
            if wait is not None and self._last_wait is not None:
                self._waited_s += wait - self._last_wait
                self._waited_over_s += now - self._last_log
            self._last_wait = wait
        self._last_log = now
        self._last_step = step
        if not self.writes:
            return
        self._open()
        self._writer.append_step(step=step, loss=float(loss), extra=metrics, **fields)
        # Rank 0 knows its own step time; the other ranks' are not measured (NaN), which
        # readers leave out (no straggler is judged from them).
        self._writer.append_rank_times([fields["step_time_s"]] + [float("nan")] * (self.world_size - 1))
        self._append_rank_norms(step)
        if self._model is not None and step % self._checksum_every == 0:
            self.checksum(step)
        self._maybe_flush()

    def eval(self, step, loss, tokens=0, time_s=0.0, **metrics):
        """One held-out evaluation after `step`'s update: its token-mean loss over `tokens`
        target tokens, and any metrics of your own. Evaluations come in step order. An
        evaluation at or before the step a resume started from is the earlier attempt's,
        recorded already (a script that evaluates at the top of its loop evaluates that step
        again): it is left out."""
        if not self.writes or 0 < step <= self.resumed_from:
            return
        self._open()
        self._writer.append_eval(step, loss, tokens, time_s, extra=metrics)
        self._maybe_flush()

    def declare_timing(self, *names):
        """Declares metrics of your own timing metrics: figures you derive from the clock
        (mfu=..., your own throughput), whose bits no two runs share. `sweep compare` and
        `sweep reproduce` then leave them out of their bit-for-bit verdict and show their
        means apart. Any time, before or after the metric's first log(); a grid can say the
        same with `program.timing_metrics` (docs/grid.md)."""
        for name in names:
            if not sweep_record.valid_metric_name(name):
                raise ValueError(f"declare_timing: metric name {name!r}: expected 1-64 letters, digits, '_', "
                                 "'.' or '-'")
        self._timing.update(names)
        if self._writer is not None:  # else _open() declares them (watch() gives it the parameters)
            self._writer.declare_timing(*names)

    def summary(self, key, value):
        """A run-level fact for the record's /summary (text)."""
        if self.writes:
            self._open()
            self._writer.set_summary(key, str(value))
            self._summary_keys.add(key)

    def _maybe_flush(self):
        # The first row at once (a run's progress shows from its first step), then every
        # flush_every_s seconds.
        if self._flushed_once and time.monotonic() - self._last_flush < self._flush_every_s:
            return
        self._flushed_once = True
        self._writer.flush()
        self._last_flush = time.monotonic()

    def finish(self, status=None, failure=""):
        """Ends the run: "completed", "diverged" (with `failure` saying why), or "stopped" at
        the step a search asked for; by default "stopped" when should_stop() holds for the
        last step logged, else "completed". The final parameters are checksummed first."""
        if self._finished:
            return
        if status is None:
            status = "stopped" if self.should_stop(self._last_step) else "completed"
        if status == "stopped" and not self.should_stop(self._last_step):
            raise ValueError(f"finish: 'stopped' after step {self._last_step}, but no search asked this run "
                             "to stop there (should_stop)")
        if self.writes:
            self._open()
            if self._model is not None and self._last_step not in self._checksummed:
                self.checksum(self._last_step)
            if self._waited_over_s > 0 and "rank_runqueue_share" not in self._summary_keys:
                share = min(max(self._waited_s / self._waited_over_s, 0.0), 1.0)
                self._writer.set_summary("rank_runqueue_share", "%.3g" % share)
            self._writer.finish(status, failure)
        self._finished = True

    def fail(self, why):
        """Ends the run as failed (the record stays partial, with `why`)."""
        if self.writes and self._writer is not None:
            self._writer.abandon(why)
        self._finished = True

    def _at_exit(self):
        if not self._finished and self._writer is not None:
            self._writer.abandon(self._uncaught or "the script ended without run.finish()")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.fail(f"{exc_type.__name__}: {exc}" if str(exc) else exc_type.__name__)
        elif not self._finished:
            self.finish()
        return False

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, step, model, optimizer=None, **extra):
        """save() of the usual state: the model's and optimizer's state dicts, torch's and
        numpy's global RNG states (dropout draws from torch's), and `extra`."""
        import torch
        state = {"model": model.state_dict(), "torch_rng": torch.get_rng_state(),
                 "numpy_rng": np.random.get_state(), "extra": extra}
        if optimizer is not None:
            state["optimizer"] = optimizer.state_dict()
        self.save(state, step)

    def resume(self, model, optimizer=None):
        """restore() of what checkpoint() saved, into `model` and `optimizer`; returns the step
        it was saved after (0: none, start from the beginning). Train from that step + 1."""
        state = self.restore()
        if state is None:
            return 0
        import torch
        model.load_state_dict(state["model"])
        if optimizer is not None and "optimizer" in state:
            optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        self.resumed_extra = state.get("extra", {})
        return self.resumed_from

    def save(self, state, step):
        """Saves `state` (anything torch.save takes: model, optimizer and RNG states, ...)
        as the checkpoint after `step`, atomically, in the run's checkpoints/ (rank 0)."""
        if not self.writes:
            return
        import torch
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        path = os.path.join(self.checkpoint_dir, "last.pt")
        tmp = path + ".tmp"
        torch.save({"step": int(step), "state": state,
                    "telemetry_windows": {"loss": self._loss_window, "grad_norm": self._norm_window}}, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._writer and self._writer.flush()

    def restore(self):
        """The state saved by save() in an earlier attempt of this run (a promoted halving
        run, a retry), or None. The record then carries on from that step: the earlier
        attempt's rows up to it are recorded again, so the finished record is the run's
        whole history, as if it had run straight through."""
        if self.dir is None:
            return None
        if self._writer is not None:
            raise RecordError("restore()/resume() after the record was opened (watch, log, eval): resume first")
        path = os.path.join(self.checkpoint_dir, "last.pt")
        if not os.path.exists(path):
            return None
        import torch
        saved = torch.load(path, map_location="cpu")
        step = int(saved["step"])
        self._carried = self._earlier_rows(step)
        self.resumed_from = step
        self._last_step = self._grad_step = step
        # gradients()'s spike windows as they were at the checkpoint, so the rows decided
        # after it are those of the run trained straight through.
        windows = saved.get("telemetry_windows") or {}
        self._loss_window = [float(x) for x in windows.get("loss", [])]
        self._norm_window = [float(x) for x in windows.get("grad_norm", [])]
        if self._carried:
            self._checksummed.update(s for s, _, _ in self._carried["checksums"])
        return saved["state"]

    def _earlier_rows(self, step):
        """Rows up to `step` of this run's last record: the partial a failed attempt left,
        else the newest record a search stopped at a rung (moved aside by the driver)."""
        import h5py
        candidates = []
        partial = os.path.join(self.dir, "record.h5" + sweep_record.PARTIAL_SUFFIX)
        if os.path.exists(partial):
            candidates.append(partial)
        aside = sorted((n for n in os.listdir(self.dir) if n.startswith("record.h5.stopped-")), reverse=True)
        candidates += [os.path.join(self.dir, n) for n in aside]
        for path in candidates:
            try:
                with h5py.File(path, "r") as f:
                    m = f["metrics"]
                    steps = m["step"][:]
                    keep = steps <= step
                    if keep.sum() != step:
                        continue  # not every step up to the checkpoint is there
                    rows = {k: m[k][:][keep] for k in m if k != "extra"}
                    extra = {k: m["extra"][k][:][keep] for k in m["extra"]} if "extra" in m else {}
                    ck = f["checksums"]
                    ck_keep = ck["step"][:] <= step
                    tensors = ck["tensors"][:][ck_keep] if "tensors" in ck else [[]] * int(ck_keep.sum())
                    checksums = list(zip(ck["step"][:][ck_keep], ck["params"][:][ck_keep], tensors))
                    evals, eval_extra = [], {}
                    if "eval" in f:
                        ev = f["eval"]
                        ev_keep = ev["step"][:] <= step
                        evals = list(zip(ev["step"][:][ev_keep], ev["loss"][:][ev_keep], ev["tokens"][:][ev_keep],
                                         ev["time_s"][:][ev_keep]))
                        if "extra" in ev:
                            eval_extra = {k: ev["extra"][k][:][ev_keep] for k in ev["extra"]}
                    times = f["ranks/step_time_s"][:][: int(step)]
                    rank_norms = f["ranks/grad_norm"][:][: int(step)] if "grad_norm" in f["ranks"] else []
                    telemetry = []
                    if "telemetry" in f:
                        t = f["telemetry"]
                        t_keep = t["step"][:] <= step
                        norms = t["tensor_grad_norm"][:][t_keep] if "tensor_grad_norm" in t else [[]] * int(
                            t_keep.sum())
                        whys = [w.decode() if isinstance(w, bytes) else str(w) for w in t["why"][:][t_keep]]
                        telemetry = list(zip(t["step"][:][t_keep], whys, norms))
                    return {"steps": rows, "extra": extra, "checksums": checksums, "evals": evals,
                            "eval_extra": eval_extra, "times": times, "rank_norms": rank_norms,
                            "telemetry": telemetry}
            except (OSError, KeyError):
                continue
        raise RecordError(f"{self.dir}: a checkpoint after step {step} but no earlier record holds steps 1-{step}; "
                          "the run cannot carry on its record (remove checkpoints/ to start it over)")

    def _replay(self, rows):
        w = self._writer
        n = len(rows["steps"]["step"])

        def fit(row):  # a per-rank row of the earlier attempt in this world (NaN: not measured)
            return ([float(x) for x in row] + [float("nan")] * self.world_size)[: self.world_size]
        for i in range(n):
            row = {k: v[i].item() for k, v in rows["steps"].items()}
            extra = {k: float(v[i]) for k, v in rows["extra"].items() if not math.isnan(v[i])}
            w.append_step(row, extra=extra)
            if i < len(rows["times"]):
                w.append_rank_times(fit(rows["times"][i]))
            if i < len(rows["rank_norms"]):
                w.append_rank_grad_norms(fit(rows["rank_norms"][i]))
        for s, p, t in rows["checksums"]:
            w.append_checksum(int(s), int(p), [int(x) for x in t])
        for s, why, norms in rows["telemetry"]:
            w.append_telemetry(int(s), why, [float(x) for x in norms])
        for i, (s, loss, tokens, t) in enumerate(rows["evals"]):
            extra = {k: float(v[i]) for k, v in rows["eval_extra"].items() if not math.isnan(v[i])}
            w.append_eval(int(s), float(loss), int(tokens), float(t), extra=extra)


def init(settings=None, *, keys=None, out=None, flush_every_s=2.0, environment=None):
    """This process's run.

    `settings`: the script's own settings (an argparse.Namespace or a dict), updated in place
    from the run's config under sweep: a setting is the program's own key `model.<name>`
    when the grid declares one, else the built-in key its name stands for (ALIASES: lr is
    train.lr, batch_size train.micro_batch, ...), else `keys[name]` ({"base_lr":
    "train.lr"}), which also overrides both. Only the keys the run's config holds (the ones
    the grid sets) replace settings; the others keep the script's values, which the record's
    config holds as what ran (program.script_defaults names their keys).
    `out`: where a run outside sweep writes its record (None: nowhere). `flush_every_s`: how
    often rows reach the disk. `environment`: facts for the record's /environment (device,
    blas, ...), over sweep_record.environment_defaults().
    """
    return Run(settings, keys, out, flush_every_s, environment)
