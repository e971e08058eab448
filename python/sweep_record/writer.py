"""RecordWriter: writes one run record (results/SCHEMA.md, in one of the versions of
``SCHEMA_VERSIONS``) as the C++ RecordWriter does (results/record/record.cpp), so that
sweep's reader accepts it.

The record is ``record.h5.partial`` while the run goes on, holds ``status = running``, and
is renamed to ``record.h5`` only by ``finish()``, after the ``digest`` of SCHEMA.md's
Integrity section has been computed from the file as it is on disk and stored in it. A run
that fails (``abandon()``, or an exception inside ``with RecordWriter(...)``) keeps its
``.partial`` with ``status = failed`` and the cause in ``failure``. A completed
``record.h5`` is never overwritten, and the run directory's ``run.lock`` (an ``flock``,
the lock sweep-train's rank 0 takes) is held while the writer is open.
"""

import errno
import fcntl
import os
import platform
import socket
import stat
import sys
import threading
import time

import h5py
import numpy as np

from .checksum import run_id_of
from .digest import DOUBLE_METRICS, INT_METRICS, STEP_FIELDS, record_digest, stored_digest

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "PARTIAL_SUFFIX",
    "STEP_FIELDS",
    "NUMERICS_ENV",
    "SLURM_ENV",
    "RecordError",
    "RecordWriter",
    "environment_defaults",
    "valid_metric_name",
]

#: The layouts of results/SCHEMA.md this package writes, one per thing that raises a
#: record to it: a record starts at BASE_SCHEMA_VERSION and is raised, never lowered, by
#: the first thing it holds that a later version added.
BASE_SCHEMA_VERSION = 3  # /metrics, /checksums, /eval, /summary health*
EXTRA_SCHEMA_VERSION = 4  # a program's own figures: /metrics/extra, /eval/extra
TELEMETRY_SCHEMA_VERSION = 5  # gradient telemetry: /ranks/grad_norm, /telemetry
#: Every version a record of this package can have, oldest first, and the newest; docs
#: name these rather than repeat the numbers. sweep's C++ reader reads each of them (up
#: to results/record/record.h kSchemaVersion: test_record_writer.py checks).
SCHEMA_VERSIONS = (BASE_SCHEMA_VERSION, EXTRA_SCHEMA_VERSION, TELEMETRY_SCHEMA_VERSION)
SCHEMA_VERSION = SCHEMA_VERSIONS[-1]
PARTIAL_SUFFIX = ".partial"
LOCK_NAME = "run.lock"

#: The variables recorded as env.<NAME> (results/SCHEMA.md, /environment).
NUMERICS_ENV = (
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "MKL_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "CUDA_VISIBLE_DEVICES",
    "ATEN_CPU_CAPABILITY",
    "DNNL_MAX_CPU_ISA",
    "NPY_DISABLE_CPU_FEATURES",
)

#: Where Slurm ran the run: (environment key, the job's variable); empty outside Slurm.
#: include/sweep/record_writer.h's kSlurmEnv, in its order (test_record_writer.py).
SLURM_ENV = (
    ("slurm.job_id", "SLURM_JOB_ID"),
    ("slurm.array_job_id", "SLURM_ARRAY_JOB_ID"),
    ("slurm.array_task_id", "SLURM_ARRAY_TASK_ID"),
    ("slurm.partition", "SLURM_JOB_PARTITION"),
    ("slurm.account", "SLURM_JOB_ACCOUNT"),
    ("slurm.qos", "SLURM_JOB_QOS"),
    ("slurm.nodelist", "SLURM_JOB_NODELIST"),
    ("slurm.cluster", "SLURM_CLUSTER_NAME"),
)

_STR = h5py.string_dtype(encoding="utf-8")
_U64_MAX = (1 << 64) - 1


class RecordError(RuntimeError):
    """A record that cannot be written; the message names the path and what to do."""


def valid_metric_name(name):
    """Whether `name` may name a program's own metric: 1-64 of A-Z a-z 0-9 _ . - (it names
    an HDF5 dataset, /metrics/extra/<name>; record_format.h valid_metric_name)."""
    return (isinstance(name, str) and 0 < len(name) <= 64 and name not in (".", "..")
            and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name))


def _metric_value(name, value):
    """A metric's value as a float; anything that is not one real number is refused."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (int, float)):  # a numpy scalar or array, a torch tensor
        size = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", 1)
        if size != 1:
            raise TypeError(f"metric {name!r}: {type(value).__name__} of {size} elements is not a number; "
                            "a metric is one real number per row")
        value = item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric {name!r}: {type(value).__name__} {value!r:.60} is not a number; "
                        "a metric is one real number per row (int or float)")
    return float(value)


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cpu_isa():
    """The widest instruction set that changes oneDNN's and LibTorch's kernels (and so the
    bits of bf16 and vectorised ops): results/program_env.cpp's cpu_isa, from the flags."""
    flags = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    for name, flag in (("amx_bf16", "amx_bf16"), ("avx512_bf16", "avx512_bf16"), ("avx512", "avx512f"),
                       ("avx2", "avx2")):
        if flag in flags:
            return name
    return "baseline"


def environment_defaults():
    """Every /environment key SCHEMA.md documents, with what this process can tell for sure.

    Facts the writer cannot know (the device, the BLAS, the model kinds, the data's entropy
    floor, the git commit of the training code, ...) are left empty for the training script
    to fill; PyTorch's versions and settings are filled only when the script has already
    imported torch (this package never imports it).
    """
    env = {
        "sweep_version": "",
        "git_commit": "",
        "git_dirty": "",
        "compiler": "python " + platform.python_version(),
        "libtorch": "",
        "hdf5": h5py.version.hdf5_version,
        "cuda": "",
        "device": "",
        "blas": "",
        "blas.kernel": "",
        "blas_threads": "",
        "torch_threads": "",
        "deterministic_algorithms": "",
        "onednn": "",
        "determinism": "",
        "cpu": _cpu_name(),
        "cpu.isa": _cpu_isa(),
        "aten.isa": "",
        "hosts": socket.gethostname(),
        # One process writes the record: rank 0's host is the one known here.
        "rank_hosts": socket.gethostname(),
        "os": " ".join((platform.system(), platform.release(), platform.machine())),
        "data.entropy_floor": "",
        # A grid's program's data files (program.data), hashed by the driver: the first as
        # data.file and data.hash, all of them in program.data.
        "data.file": os.environ.get("SWEEP_DATA_FILE", ""),
        "data.size": "",
        "data.mtime_ns": "",
        "data.hash": os.environ.get("SWEEP_DATA_HASH", ""),
        "program.data": os.environ.get("SWEEP_DATA_FILES", ""),
        "trainer": "",
        "trainer.models": "",
        # A grid's program (sweep sets these for each run it starts): the command, a hash
        # of the files it names, and the keys the grid declared for it.
        "program": os.environ.get("SWEEP_PROGRAM", ""),
        "program.digest": os.environ.get("SWEEP_PROGRAM_DIGEST", ""),
        "program.keys": os.environ.get("SWEEP_PROGRAM_KEYS", ""),
        "program.writes": os.environ.get("SWEEP_PROGRAM_WRITES", ""),
        # Its source files with their hashes (argv's and program.files), and where it started.
        "program.files": os.environ.get("SWEEP_PROGRAM_FILES", ""),
        "program.trees": os.environ.get("SWEEP_PROGRAM_TREES", ""),
        "program.cwd": os.environ.get("SWEEP_PROGRAM_CWD", ""),
        "program.pass_args": os.environ.get("SWEEP_PROGRAM_PASS_ARGS", ""),
        # The metrics its grid declared timing (program.timing_metrics): never compared bit for bit.
        "program.timing_metrics": os.environ.get("SWEEP_PROGRAM_TIMING_METRICS", ""),
        # How it names its batch and steps, and whether one rank gets torch.distributed's variables.
        "program.conventions": os.environ.get("SWEEP_PROGRAM_CONVENTIONS", ""),
        # What held the program: sweep-confine's level ("landlock-abi-7: writes, signals").
        "program.confinement": os.environ.get("SWEEP_CONFINEMENT", ""),
        # The container image the run ran in (sweep sets these when launch.container is).
        "container.runtime": os.environ.get("SWEEP_CONTAINER_RUNTIME", ""),
        "container.image": os.environ.get("SWEEP_CONTAINER_IMAGE", ""),
        "container.digest": os.environ.get("SWEEP_CONTAINER_DIGEST", ""),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            env["libtorch"] = str(torch.__version__)
            env["cuda"] = str(torch.version.cuda) if torch.version.cuda else "none"
            env["torch_threads"] = str(torch.get_num_threads())
            env["deterministic_algorithms"] = "1" if torch.are_deterministic_algorithms_enabled() else "0"
            env["onednn"] = "on" if torch.backends.mkldnn.enabled else "off"
            capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
            if capability is not None:  # PyTorch 2.x: "AVX2", "AVX512", "DEFAULT"
                env["aten.isa"] = str(capability()).lower()
        except Exception:  # an unusual torch build: these stay as they are
            pass
    for name in NUMERICS_ENV:
        env["env." + name] = os.environ.get(name, "")
    for key, name in SLURM_ENV:
        env[key] = os.environ.get(name, "")
    return env


def _check_text(what, value):
    if not isinstance(value, str):
        raise TypeError(f"{what}: expected a string, got {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what}: contains a NUL character, which a record string cannot hold")
    value.encode("utf-8")  # a lone surrogate raises here, not halfway through a write
    return value


def _shape_of(shape):
    shape = getattr(shape, "shape", shape)  # a tensor or an array stands for its shape
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {dims}: negative dimension")
    return dims


def _exists(path):
    """Anything at `path`, a dangling symbolic link included (lstat)."""
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Column:
    """An extendable dataset that grows by rows (record.cpp Column), rows buffered until flush."""

    def __init__(self, group, name, dtype, cols=0):
        self.dtype = np.dtype(dtype)
        self.cols = cols
        if cols:
            shape, maxshape, chunks = (0, cols), (None, cols), (max(1, 8192 // cols), cols)
        else:
            shape, maxshape, chunks = (0,), (None,), (1024,)
        self.d = group.create_dataset(name, shape=shape, maxshape=maxshape, chunks=chunks, dtype=self.dtype)
        self.pending = []

    def flush(self):
        if not self.pending:
            return
        rows = np.asarray(self.pending, dtype=self.dtype)
        n = self.d.shape[0]
        self.d.resize(n + len(rows), axis=0)
        self.d[n:] = rows
        self.pending = []


class RecordWriter:
    """Writes one run record; mirrors the C++ sweep::RecordWriter.

    ``path`` is the record file (``.../record.h5``) or the run directory that holds it
    (created when missing). ``run_id`` defaults to sweep's id of ``config_yaml`` (XXH3-64 of
    its text, 16 hex digits). ``config`` is the (dotted key, canonical value) pairs in
    canonical order, a list of pairs or a dict. ``environment`` is laid over
    ``environment_defaults()``. ``params`` is the parameter table in the flat order: (name,
    shape) pairs, where a shape may be a tuple or anything with a ``.shape``; offsets and
    element counts follow from the order.

    Use it as a context manager: leaving the block by an exception marks the record failed
    (``abandon``) and re-raises; leaving it without ``finish()`` marks it failed too.
    """

    def __init__(self, path, run_id=None, config_yaml="", config=(), environment=None, params=(),
                 sweep_id="", world_size=1, moe_shape=None):
        path = os.fspath(path)
        if not path.endswith(".h5"):
            path = os.path.join(path, "record.h5")
        self.path = path
        self.partial = path + PARTIAL_SUFFIX
        self._mu = threading.RLock()
        self._finished = False
        self._file = None
        self._lock_fd = -1

        # Validate everything before any file is touched.
        _check_text("config_yaml", config_yaml)
        if run_id is None:
            run_id = run_id_of(config_yaml)
        _check_text("run_id", run_id)
        if len(run_id) != 16 or any(c not in "0123456789abcdef" for c in run_id):
            raise ValueError(f"run_id {run_id!r}: expected 16 lowercase hex digits (sweep's run id)")
        _check_text("sweep_id", sweep_id)
        items = list(config.items()) if isinstance(config, dict) else [tuple(kv) for kv in config]
        keys = [_check_text("config key", k) for k, _ in items]
        values = [_check_text(f"config value of {k}", v) for k, v in items]
        if len(set(keys)) != len(keys):
            raise ValueError("config: a key appears twice")
        env = environment_defaults()
        env.update(environment or {})
        for k, v in env.items():
            _check_text("environment key", k)
            _check_text(f"environment value of {k}", v)
            if not k:
                raise ValueError("environment: an empty key")
        names, shapes, offsets, numels = [], [], [], []
        offset = 0
        for name, shape in params:
            dims = _shape_of(shape)
            names.append(_check_text("parameter name", name))
            shapes.append("x".join(str(d) for d in dims))
            numel = int(np.prod(dims, dtype=np.int64))
            offsets.append(offset)
            numels.append(numel)
            offset += numel
        if len(set(names)) != len(names):
            raise ValueError("params: a parameter name appears twice")
        world_size = int(world_size)
        if world_size < 1:
            raise ValueError(f"world_size {world_size}: expected at least 1")
        self.run_id, self.world_size, self.n_tensors = run_id, world_size, len(names)
        moe_shape = tuple(int(x) for x in moe_shape) if moe_shape else ()
        if moe_shape and (len(moe_shape) != 2 or min(moe_shape) < 1):
            raise ValueError(f"moe_shape {moe_shape}: expected (layers, experts), both at least 1")
        self.moe_shape = moe_shape
        self._rank_norms = self._telemetry = None  # TELEMETRY_SCHEMA_VERSION, created with their first row
        self._rank_norm_rows = 0
        self._last_telemetry_step = None
        self._last_step = 0
        self._memory_set = False
        self._timing_metrics = set()  # declare_timing: the summary's timing_metrics

        directory = os.path.dirname(path) or "."
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise RecordError(f"{directory}: cannot create the run directory ({e.strerror})") from None
        if _exists(path):
            raise RecordError(f"{path}: a completed record is already there; it is never overwritten")
        self._take_lock(directory)
        try:
            if _exists(path):  # completed by another writer before the lock was ours
                raise RecordError(f"{path}: a completed record is already there; it is never overwritten")
            self._remove_stale_partial()
            self._create(config_yaml, keys, values, env, names, shapes, offsets, numels, sweep_id)
        except BaseException:
            if self._file is not None:
                try:
                    self._file.close()
                except Exception:
                    pass
                self._file = None
            self._release_lock()
            raise

    # ------------------------------------------------------------------ setup

    def _take_lock(self, directory):
        lock = os.path.join(directory, LOCK_NAME)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RecordError(f"{lock} is a symbolic link; refusing to write through it") from None
            raise RecordError(f"{lock}: cannot open the lock file: {e.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RecordError(f"{lock} is not a regular file; refusing to use it as a lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown process"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RecordError(
                    f"{directory}: another process is writing this run ({holder}); "
                    "a run directory has one writer at a time") from None
            raise RecordError(f"{lock}: cannot lock: {e.strerror}") from None
        note = "pid %d on %s, since %s\n" % (os.getpid(), socket.gethostname(),
                                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode(), 0)
        except OSError:
            pass  # the lock holds without the note
        self._lock_fd = fd

    def _release_lock(self):
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def _remove_stale_partial(self):
        # We hold the run's lock, so a partial here is a dead attempt's. A link is removed,
        # never followed; the new file is then created exclusively.
        try:
            st = os.lstat(self.partial)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise RecordError(f"{self.partial}: is not a regular file (a link or special file); "
                              "refusing to write through it")
        os.unlink(self.partial)

    def _create(self, config_yaml, keys, values, env, names, shapes, offsets, numels, sweep_id):
        try:
            # Without HDF5's own file lock: run.lock keeps one writer per run, and a lock on
            # this handle would be inherited by every child the program forks while the
            # record is open (a DataLoader worker, a helper): one that outlives close()
            # keeps it, and the reads that complete the record then fail with EAGAIN.
            self._file = f = h5py.File(self.partial, "w-", locking=False)  # H5F_ACC_EXCL
        except OSError as e:
            raise RecordError(f"{self.partial}: cannot create the record file ({e})") from None
        i64 = np.dtype("<i8")
        f.attrs.create("schema_version", BASE_SCHEMA_VERSION, dtype=i64)
        f.attrs.create("run_id", self.run_id, dtype=_STR)
        f.attrs.create("sweep_id", sweep_id, dtype=_STR)
        f.attrs.create("status", "running", dtype=_STR)
        f.attrs.create("failure", "", dtype=_STR)

        cfg = f.create_group("config")
        cfg.create_dataset("yaml", data=config_yaml, dtype=_STR)
        cfg.create_dataset("keys", data=np.array(keys, dtype=object), shape=(len(keys),), dtype=_STR)
        cfg.create_dataset("values", data=np.array(values, dtype=object), shape=(len(values),), dtype=_STR)

        g = f.create_group("environment")
        for k, v in env.items():
            g.attrs.create(k, v, dtype=_STR)

        p = f.create_group("params")
        p.create_dataset("name", data=np.array(names, dtype=object), shape=(len(names),), dtype=_STR)
        p.create_dataset("shape", data=np.array(shapes, dtype=object), shape=(len(shapes),), dtype=_STR)
        p.create_dataset("offset", data=np.array(offsets, dtype=i64), dtype=i64)
        p.create_dataset("numel", data=np.array(numels, dtype=i64), dtype=i64)

        m = f.create_group("metrics")
        self._metrics = {name: _Column(m, name, "<f8") for name in DOUBLE_METRICS}
        self._metrics.update({name: _Column(m, name, "<i8") for name in INT_METRICS})
        ck = f.create_group("checksums")
        self._ck_step = _Column(ck, "step", "<i8")
        self._ck_params = _Column(ck, "params", "<u8")
        self._ck_tensors = _Column(ck, "tensors", "<u8", cols=self.n_tensors) if self.n_tensors else None
        # Created with their first row: /eval and the program's own figures.
        self._eval = None
        self._step_extra, self._eval_extra = {}, {}
        self._steps = self._evals = 0
        self._last_eval_step = -1
        f.attrs.create("world_size", self.world_size, dtype=i64)
        self._ranks = f.create_group("ranks")
        self._rank_times = _Column(self._ranks, "step_time_s", "<f8", cols=self.world_size)
        self._summary = f.create_group("summary")
        self._flush()

    # ------------------------------------------------------------------ rows

    def _check_open(self):
        if self._finished:
            raise RecordError(f"{self.partial}: the record was finished or abandoned; nothing more is written")

    def append_step(self, metrics=None, extra=None, **fields):
        """One optimizer step: a dict (or keywords) of StepMetrics fields (``STEP_FIELDS``),
        and the program's own figures in `extra` ({name: number}, /metrics/extra).

        ``step`` is required (1-based, increasing); the rest default as in C++ (``clip_coef``
        and ``loss_scale`` 1, others 0). A metric missing from a row is NaN there.
        """
        given = dict(metrics or {})
        given.update(fields)
        unknown = sorted(set(given) - set(STEP_FIELDS))
        if unknown:
            raise ValueError(f"append_step: unknown field(s) {', '.join(unknown)}; the fields are "
                             f"{', '.join(STEP_FIELDS)} (a metric of your own goes in extra=)")
        if "step" not in given:
            raise ValueError("append_step: 'step' is required")
        row = {k: given.get(k, default) for k, default in STEP_FIELDS.items()}
        step = int(row["step"])
        extra = self._checked_extra("append_step", extra)
        with self._mu:
            self._check_open()
            if step <= self._last_step:
                raise ValueError(f"append_step: step {step} after step {self._last_step}; steps are 1-based and increase")
            self._push_extra("metrics", self._step_extra, self._steps, extra)
            for name in DOUBLE_METRICS:
                self._metrics[name].pending.append(float(row[name]))
            for name in INT_METRICS:
                self._metrics[name].pending.append(int(row[name]))
            self._last_step = step
            self._steps += 1

    def append_eval(self, step, loss, tokens, time_s=0.0, extra=None):
        """One held-out evaluation after `step`'s update (/eval, as sweep-train writes it):
        its token-mean `loss` over `tokens` target tokens, its wall time, and the program's
        own figures in `extra`. Evaluations come in step order."""
        step, loss, tokens, time_s = int(step), float(loss), int(tokens), float(time_s)
        extra = self._checked_extra("append_eval", extra)
        with self._mu:
            self._check_open()
            if step < self._last_eval_step:
                raise ValueError(f"append_eval: an evaluation at step {step} after one at step "
                                 f"{self._last_eval_step}; evaluations are recorded in step order")
            if self._eval is None:
                g = self._file.create_group("eval")
                self._eval = {"step": _Column(g, "step", "<i8"), "loss": _Column(g, "loss", "<f8"),
                              "tokens": _Column(g, "tokens", "<i8"), "time_s": _Column(g, "time_s", "<f8")}
            self._push_extra("eval", self._eval_extra, self._evals, extra)
            for k, v in (("step", step), ("loss", loss), ("tokens", tokens), ("time_s", time_s)):
                self._eval[k].pending.append(v)
            self._last_eval_step = step
            self._evals += 1

    @staticmethod
    def _checked_extra(what, extra):
        out = {}
        for name, value in dict(extra or {}).items():
            if not valid_metric_name(name):
                raise ValueError(f"{what}: metric name {name!r}: expected 1-64 letters, digits, '_', '.' or '-'")
            out[name] = _metric_value(name, value)
        return out

    def _raise_version(self, version):
        """schema_version up to `version`, never down: a program's first own figure
        (EXTRA_SCHEMA_VERSION) can come after its first telemetry row
        (TELEMETRY_SCHEMA_VERSION)."""
        if int(self._file.attrs["schema_version"]) < version:
            self._file.attrs.create("schema_version", version, dtype=np.dtype("<i8"))

    def _push_extra(self, group, columns, rows, extra):
        """One row of a program's own figures into /<group>/extra; a metric new in this row
        gets NaN for the rows before it, a metric missing from it NaN here."""
        for name in sorted(set(extra) - set(columns)):
            if group not in self._file or "extra" not in self._file[group]:
                self._file[group].create_group("extra")
                self._raise_version(EXTRA_SCHEMA_VERSION)
            col = _Column(self._file[group]["extra"], name, "<f8")
            col.pending.extend([float("nan")] * rows)
            columns[name] = col
        for name, col in columns.items():
            col.pending.append(extra.get(name, float("nan")))

    def append_checksum(self, step, params_checksum, tensor_checksums):
        """Parameter hashes after `step`'s update (0 = the initial parameters): the run
        checksum and one hash per parameter tensor, in /params order."""
        tensor_checksums = [int(t) for t in tensor_checksums]
        params_checksum = int(params_checksum)
        for v in [params_checksum] + tensor_checksums:
            if not 0 <= v <= _U64_MAX:
                raise ValueError(f"append_checksum: {v} is not an unsigned 64-bit hash")
        with self._mu:
            self._check_open()
            if len(tensor_checksums) != self.n_tensors:
                raise RecordError(f"{self.partial}: checksum row has {len(tensor_checksums)} tensor hashes, "
                                  f"the parameter table has {self.n_tensors}")
            self._ck_step.pending.append(int(step))
            self._ck_params.pending.append(params_checksum)
            if self._ck_tensors is not None:
                self._ck_tensors.pending.append(tensor_checksums)

    def append_rank_times(self, seconds):
        """Step time of every rank for one step (world_size values)."""
        seconds = [float(s) for s in seconds]
        with self._mu:
            self._check_open()
            if len(seconds) != self.world_size:
                raise RecordError(f"{self.partial}: {len(seconds)} rank step times for a world of {self.world_size}")
            self._rank_times.pending.append(seconds)

    def append_rank_grad_norms(self, norms):
        """Each rank's own gradient norm at the step appended last (world_size values, e.g.
        the norm of a DDP rank's gradient before its all-reduce): /ranks/grad_norm. Steps
        that gave none read NaN. Raises the record to TELEMETRY_SCHEMA_VERSION."""
        norms = [float(x) for x in norms]
        with self._mu:
            self._check_open()
            if len(norms) != self.world_size:
                raise RecordError(f"{self.partial}: {len(norms)} rank gradient norms for a world of {self.world_size}")
            steps = self._steps
            if self._rank_norm_rows >= steps:
                raise RecordError(f"{self.partial}: rank gradient norms for a step with no /metrics row "
                                  "(append the step first)")
            if self._rank_norms is None:
                self._rank_norms = _Column(self._ranks, "grad_norm", "<f8", cols=self.world_size)
                self._raise_version(TELEMETRY_SCHEMA_VERSION)
            while self._rank_norm_rows + 1 < steps:
                self._rank_norms.pending.append([float("nan")] * self.world_size)
                self._rank_norm_rows += 1
            self._rank_norms.pending.append(norms)
            self._rank_norm_rows += 1

    def append_telemetry(self, step, why, tensor_grad_norm, routed_tokens=None):
        """One row of gradient telemetry (/telemetry): the step, why it was taken ("every",
        "spike", ...), each parameter tensor's gradient norm in /params order and, for a
        writer given moe_shape, the tokens each layer's router sent to each expert (layers x
        experts, layer-major). Rows come in step order, one per step. Raises the record to
        TELEMETRY_SCHEMA_VERSION."""
        _check_text("telemetry why", why)
        norms = [float(x) for x in tensor_grad_norm]
        routed = [int(x) for x in (routed_tokens or [])]
        with self._mu:
            self._check_open()
            if len(norms) != self.n_tensors:
                raise RecordError(f"{self.partial}: a telemetry row with {len(norms)} tensor gradient norms; "
                                  f"the parameter table has {self.n_tensors}")
            want = self.moe_shape[0] * self.moe_shape[1] if self.moe_shape else 0
            if len(routed) != want:
                raise RecordError(f"{self.partial}: a telemetry row with {len(routed)} routed-token counts; "
                                  f"the writer's moe_shape says {want}")
            if self._last_telemetry_step is not None and int(step) <= self._last_telemetry_step:
                raise RecordError(f"{self.partial}: a telemetry row for step {int(step)} after one for step "
                                  f"{self._last_telemetry_step}; rows are recorded in step order, once per step")
            if self._telemetry is None:
                g = self._file.create_group("telemetry")
                self._telemetry = {"step": _Column(g, "step", "<i8"), "why": _Column(g, "why", _STR)}
                if self.n_tensors:
                    self._telemetry["tensor_grad_norm"] = _Column(g, "tensor_grad_norm", "<f8", cols=self.n_tensors)
                if self.moe_shape:
                    g.create_dataset("moe_shape", data=np.array(self.moe_shape, dtype="<i8"), dtype="<i8")
                    self._telemetry["routed_tokens"] = _Column(g, "routed_tokens", "<i8", cols=want)
                self._raise_version(TELEMETRY_SCHEMA_VERSION)
            self._last_telemetry_step = int(step)
            self._telemetry["step"].pending.append(int(step))
            self._telemetry["why"].pending.append(why)
            if self.n_tensors:
                self._telemetry["tensor_grad_norm"].pending.append(norms)
            if self.moe_shape:
                self._telemetry["routed_tokens"].pending.append(routed)

    def set_memory(self, params, grads, optimizer, step_peak=None, peak_rss=None):
        """Per-rank bytes (one value per rank): held between steps (params, grads,
        optimizer state), the step's peak and the peak resident set; -1 where not
        measured, the default for the last two. Written once, any time before finish()."""
        lists = {"params_bytes": params, "grads_bytes": grads, "optimizer_bytes": optimizer,
                 "step_peak_bytes": step_peak if step_peak is not None else [-1] * self.world_size,
                 "peak_rss_bytes": peak_rss if peak_rss is not None else [-1] * self.world_size}
        lists = {k: [int(x) for x in v] for k, v in lists.items()}
        for k, v in lists.items():
            if len(v) != self.world_size:
                raise ValueError(f"set_memory: {k} has {len(v)} values for a world of {self.world_size}")
        with self._mu:
            self._check_open()
            if self._memory_set:
                raise RecordError(f"{self.partial}: set_memory was already called; memory is written once")
            for k, v in lists.items():
                self._ranks.create_dataset(k, data=np.array(v, dtype="<i8"), dtype="<i8")
            self._memory_set = True

    def set_summary(self, key, value):
        """A run-level fact for /summary (strings, e.g. "nonfinite_steps_skipped", "0")."""
        _check_text("summary key", key)
        _check_text(f"summary value of {key}", value)
        with self._mu:
            self._check_open()
            self._summary.attrs.create(key, value, dtype=_STR)

    def declare_timing(self, *names):
        """Declares metrics of the program's own (append_step's and append_eval's `extra`)
        timing metrics: figures it derives from the clock (MFU, its own throughput), whose
        bits no two runs share. `sweep compare` and `reproduce` leave them out of their
        bitwise verdict and show their means apart. Stored in /summary `timing_metrics`
        (names, space-separated); the record's own columns (loss, lr, ...) are compared
        whatever it says. Mirrors the C++ RecordWriter::declare_timing_metric."""
        for name in names:
            if not valid_metric_name(name):
                raise ValueError(f"declare_timing: metric name {name!r}: expected 1-64 letters, digits, '_', "
                                 "'.' or '-'")
        with self._mu:
            self._check_open()
            if set(names) <= self._timing_metrics:
                return
            self._timing_metrics.update(names)
            self._summary.attrs.create("timing_metrics", " ".join(sorted(self._timing_metrics)), dtype=_STR)

    def flush(self):
        """Writes buffered rows and flushes the file to disk."""
        with self._mu:
            self._check_open()
            self._flush()

    def _flush(self):
        self._rank_times.flush()
        for c in self._metrics.values():
            c.flush()
        self._ck_step.flush()
        self._ck_params.flush()
        if self._ck_tensors is not None:
            self._ck_tensors.flush()
        for c in list((self._eval or {}).values()) + list(self._step_extra.values()) + list(self._eval_extra.values()):
            c.flush()
        for c in ([self._rank_norms] if self._rank_norms else []) + list((self._telemetry or {}).values()):
            c.flush()
        self._file.flush()

    # ------------------------------------------------------------------ the end

    def finish(self, status="completed", failure=""):
        """Ends the run: sets `status` ("completed"; "diverged", with `failure` saying why;
        "stopped", at the rung a search asked for), closes the file, stores its digest and
        renames it to record.h5."""
        if status not in ("completed", "diverged", "stopped"):
            raise ValueError(f"finish: status {status!r}; a finished record is 'completed', 'diverged' or 'stopped' "
                             "(a failed run calls abandon(failure) and stays .partial)")
        _check_text("failure", failure)
        with self._mu:
            if self._finished:
                raise RecordError(f"{self.partial}: the record was already finished or marked failed; "
                                  "it is not completed")
            try:
                self._flush()
                self._file.attrs.create("status", status, dtype=_STR)
                self._file.attrs.create("failure", failure, dtype=_STR)
            except BaseException as e:
                self._finished = True
                self._mark_failed_fresh(f"{type(e).__name__}: {e}")
                self._release_lock()
                raise
            self._finished = True  # from here on nothing else is written, whatever happens
            try:
                self._complete()
            finally:
                self._release_lock()

    def _complete(self):
        f, self._file = self._file, None
        f.close()
        # Integrity: read back what is on disk (an unreadable file is never completed),
        # hash it as every reader will, and store the digest.
        digest = record_digest(self.partial)
        with h5py.File(self.partial, "r+", locking=False) as g:
            g.attrs.create("digest", digest, dtype=_STR)
            g.flush()
        if stored_digest(self.partial) != digest or record_digest(self.partial) != digest:
            raise RecordError(f"{self.partial}: the digest did not reach the disk; the record stays partial")
        _fsync(self.partial)
        # link() fails when the target exists, so a completed record is never replaced.
        try:
            os.link(self.partial, self.path)
        except OSError as e:
            raise RecordError(f"{self.path}: cannot complete the record ({e.strerror})") from None
        os.unlink(self.partial)
        try:
            _fsync(os.path.dirname(self.path) or ".")
        except OSError:
            pass  # the record is complete and whole; only the entry's durability is less sure

    def abandon(self, failure):
        """Marks the run failed with `failure`, flushes and closes, and leaves the file
        ``.partial``: a failed run never yields a completed record. A no-op once finished."""
        failure = str(failure).replace("\0", " ")
        with self._mu:
            if self._finished or self._file is None:
                return
            self._finished = True
            try:
                try:
                    self._flush()
                except Exception:
                    pass  # recording the cause matters more than the last buffered rows
                try:
                    self._file.attrs.create("status", "failed", dtype=_STR)
                    self._file.attrs.create("failure", failure, dtype=_STR)
                    self._file.flush()
                    self._file.close()
                    self._file = None
                except Exception:
                    self._mark_failed_fresh(failure)
            finally:
                self._release_lock()

    def _mark_failed_fresh(self, failure):
        """After a failed write, drop the handle and mark what is on disk failed."""
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except Exception:
                pass
        try:
            with h5py.File(self.partial, "r+", locking=False) as g:
                g.attrs.create("status", "failed", dtype=_STR)
                g.attrs.create("failure", failure, dtype=_STR)
        except Exception:
            pass  # the file on disk is not readable: the driver's post-mortem says why

    def close(self):
        """Leaves an unfinished record failed (``.partial``); a no-op after finish/abandon."""
        self.abandon("the training script closed the record writer without finish()")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            text = f"{exc_type.__name__}: {exc}" if str(exc) else exc_type.__name__
            self.abandon(text)
        else:
            self.close()
        return False

    def __del__(self):
        try:
            if not self._finished and self._file is not None:
                self.abandon("the record writer was dropped without finish()")
        except Exception:
            pass
