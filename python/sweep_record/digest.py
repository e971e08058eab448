"""The record digest of results/SCHEMA.md, "Integrity" (the C++ reader's ``Digest``).

XXH64 (seed 0) of one byte stream of items, in a fixed order. An item is its name in
ASCII, one NUL, then its payload: numbers as their 8 little-endian bytes, a string as its
UTF-8 bytes and one NUL, a list of strings as each string and one NUL, a set of attributes
as, sorted by name (bytewise), each name NUL value NUL.
"""

import h5py
import numpy as np
import xxhash

__all__ = ["DOUBLE_METRICS", "INT_METRICS", "STEP_FIELDS", "record_digest", "stored_digest"]

#: The built-in step metrics, one /metrics column each: StepMetrics
#: (include/sweep/record_format.h) in its order, field -> default, an int for an int64
#: column and a float for a float64 one (`step`, an int64, has no default). The one list:
#: the writer's fields, the digest's columns and sweep.init()'s built-ins come from it.
STEP_FIELDS = {
    "step": None,
    "loss": 0.0,
    "lr": 0.0,
    "grad_norm": 0.0,
    "clip_coef": 1.0,
    "loss_scale": 1.0,
    "skipped": 0,
    "tokens": 0,
    "unused_params": 0,
    "step_time_s": 0.0,
    "tokens_per_s": 0.0,
    "record_time_s": 0.0,
}

#: /metrics columns in the digest's order (record.cpp SWEEP_DOUBLE_METRICS, SWEEP_INT_METRICS):
#: the float64 ones, then the int64 ones, each in StepMetrics' order.
DOUBLE_METRICS = tuple(name for name, default in STEP_FIELDS.items() if isinstance(default, float))
INT_METRICS = tuple(name for name in STEP_FIELDS if name not in DOUBLE_METRICS)


def _text(value):
    """A stored string as bytes (h5py gives bytes for variable-length strings)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
        if isinstance(value, bytes):
            return value
    return str(value).encode("utf-8")


class _Stream:
    def __init__(self):
        self.h = xxhash.xxh64(seed=0)

    def name(self, name):
        self.h.update(name.encode("ascii") + b"\0")

    def str(self, name, value):
        self.name(name)
        self.h.update(_text(value) + b"\0")

    def strs(self, name, values):
        self.name(name)
        for v in values:
            self.h.update(_text(v) + b"\0")

    def attrs(self, name, attrs):
        self.name(name)
        items = sorted(((k.encode("utf-8"), _text(attrs[k])) for k in attrs.keys()), key=lambda kv: kv[0])
        for k, v in items:
            self.h.update(k + b"\0" + v + b"\0")

    def nums(self, name, values, dtype):
        self.name(name)
        a = np.ascontiguousarray(np.asarray(values, dtype=dtype).reshape(-1), dtype=np.dtype(dtype).newbyteorder("<"))
        if a.size:
            self.h.update(a.tobytes())

    def text(self):
        return "xxh64:%016x" % self.h.intdigest()


def _root_i64(f, name, default):
    return int(f.attrs[name]) if name in f.attrs else default


def _digest_of_file(f):
    d = _Stream()
    d.nums("schema_version", [_root_i64(f, "schema_version", 0)], "<i8")
    for a in ("run_id", "sweep_id", "status", "failure"):
        d.str(a, f.attrs[a] if a in f.attrs else "")
    d.nums("world_size", [_root_i64(f, "world_size", 1)], "<i8")
    if "lineage" in f.attrs:  # version 6: a run started from another run's checkpoint
        d.str("lineage", f.attrs["lineage"])
        d.str("parent_run_id", f.attrs["parent_run_id"] if "parent_run_id" in f.attrs else "")
        d.nums("parent_step", [_root_i64(f, "parent_step", 0)], "<i8")
    d.str("config/yaml", f["config/yaml"][()])
    d.strs("config/keys", f["config/keys"][:])
    d.strs("config/values", f["config/values"][:])
    d.attrs("environment", f["environment"].attrs)
    d.strs("params/name", f["params/name"][:])
    d.strs("params/shape", f["params/shape"][:])
    d.nums("params/offset", f["params/offset"][:], "<i8")
    d.nums("params/numel", f["params/numel"][:], "<i8")
    for m in DOUBLE_METRICS:
        d.nums("metrics/" + m, f["metrics/" + m][:], "<f8")
    for m in INT_METRICS:
        d.nums("metrics/" + m, f["metrics/" + m][:], "<i8")
    ranks = f["ranks"]
    d.nums("ranks/step_time_s", ranks["step_time_s"][:], "<f8")
    if "params_bytes" in ranks:
        for m in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            d.nums("ranks/" + m, ranks[m][:], "<i8")
    if "step_peak_bytes" in ranks:
        for m in ("step_peak_bytes", "peak_rss_bytes"):
            d.nums("ranks/" + m, ranks[m][:], "<i8")
    d.attrs("summary", f["summary"].attrs)
    ck = f["checksums"]
    d.nums("checksums/step", ck["step"][:], "<i8")
    d.nums("checksums/params", ck["params"][:], "<u8")
    tensors = ck["tensors"][:] if len(f["params/name"]) else np.zeros(0, dtype="<u8")
    d.nums("checksums/tensors", tensors, "<u8")
    if "eval" in f:  # version 3: held-out evaluations, only in runs that had them
        ev = f["eval"]
        d.nums("eval/step", ev["step"][:], "<i8")
        d.nums("eval/loss", ev["loss"][:], "<f8")
        d.nums("eval/tokens", ev["tokens"][:], "<i8")
        d.nums("eval/time_s", ev["time_s"][:], "<f8")
    # Version 4: a program's own figures, per step then per evaluation, in name order.
    for group in ("metrics", "eval"):
        if group in f and "extra" in f[group]:
            extra = f[group]["extra"]
            for name in sorted(extra.keys(), key=lambda n: n.encode("utf-8")):
                d.nums("%s/extra/%s" % (group, name), extra[name][:], "<f8")
    # Version 5: each rank's own gradient norm, then the gradient telemetry.
    if "grad_norm" in ranks:
        d.nums("ranks/grad_norm", ranks["grad_norm"][:], "<f8")
    if "telemetry" in f:
        tm = f["telemetry"]
        d.nums("telemetry/step", tm["step"][:], "<i8")
        d.strs("telemetry/why", tm["why"][:])
        norms = tm["tensor_grad_norm"][:] if len(f["params/name"]) else np.zeros(0, dtype="<f8")
        d.nums("telemetry/tensor_grad_norm", norms, "<f8")
        if "moe_shape" in tm:
            d.nums("telemetry/moe_shape", tm["moe_shape"][:], "<i8")
            d.nums("telemetry/routed_tokens", tm["routed_tokens"][:], "<i8")
    return d.text()


def record_digest(record):
    """The digest of the record's contents as they are now: ``xxh64:`` and 16 hex digits.

    `record` is a path or an open h5py.File. Compare it with ``stored_digest`` to verify a
    record as sweep's reader does.
    """
    if isinstance(record, h5py.File):
        return _digest_of_file(record)
    with h5py.File(record, "r") as f:
        return _digest_of_file(f)


def stored_digest(record):
    """The record's ``digest`` root attribute, or "" when it has none."""
    if isinstance(record, h5py.File):
        return _text(record.attrs["digest"]).decode("utf-8") if "digest" in record.attrs else ""
    with h5py.File(record, "r") as f:
        return stored_digest(f)
