#!/usr/bin/python3
"""A record is readable without any project code: Debian's h5py finds every dataset
the skeleton documents. Usage: h5py_reads_record.py BIN_DIR RUN_CONFIG"""
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import xxhash

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results", "SCHEMA.md")
TYPES = {"int64": np.int64, "uint64": np.uint64, "float64": np.float64}


def check_schema_doc(f, expect):
    """Every attribute and dataset results/SCHEMA.md documents is in the file, with the
    documented type: the document and the writer cannot drift apart unnoticed. What the
    document calls optional is required only where it applies: a section titled "only in
    runs ..." when its group exists; in an attribute section, a paragraph beginning "When
    `/eval` exists" when the record has /eval, one beginning "When train.leaf is set" when
    its config sets train.leaf, one beginning "Written by the C++ writers" unless the
    Python writer wrote it (its /environment `compiler` is "python ..."), and one beginning
    "Measured by sweep's trainer where the kernel keeps a schedstat" when sweep-train wrote
    it on a kernel that keeps one, and one beginning "Written by sweep's trainer for runs on
    more than one rank" when sweep-train wrote a record of more than one rank, and one
    beginning "Written by a program that declares" when the record declares timing metrics."""
    env = f["environment"].attrs
    by_cpp = not as_text(env["compiler"]).startswith("python ") if "compiler" in env else True
    config_keys = [as_text(k) for k in f["config/keys"][:]] if "config/keys" in f else []
    leaf = "train.leaf" in config_keys
    config_values = [as_text(v) for v in f["config/values"][:]] if "config/values" in f else []
    fp16 = by_trainer_of(env) and dict(zip(config_keys, config_values)).get("train.precision") == "fp16"
    by_trainer = os.path.basename(as_text(env.get("trainer", ""))) == "sweep-train"
    schedstat = by_trainer and os.path.exists("/proc/thread-self/schedstat")
    world = int(f.attrs.get("world_size", 1))
    sections = re.split(r"^## ", open(SCHEMA, encoding="utf-8").read(), flags=re.M)[1:]
    found = 0
    for sec in sections:
        title, body = sec.split("\n", 1)
        group = re.match(r"`(/\w+)`", title)
        if group and "only in runs" in title and group.group(1)[1:] not in f:
            continue
        rows = re.findall(r"^\| `([\w.]+)` \| ([\w ]+?)(?: \[.*?\])? \|", body, flags=re.M)
        for attr in re.findall(r"root attribute `(\w+)`", title + body):
            expect(attr in f.attrs, f"SCHEMA.md: root attribute {attr}")
            found += 1
        if title.startswith("Root attributes"):
            for name, _ in rows:
                line = next(x for x in body.splitlines() if x.startswith(f"| `{name}`"))
                if ("only in a run started from" in line or "with `lineage`" in line) and "lineage" not in f.attrs:
                    continue  # a run with no parent run (version 6 attributes)
                expect(name in f.attrs, f"SCHEMA.md: root attribute {name}")
                found += 1
        elif group and "attributes" in title:
            expect(group.group(1)[1:] in f, f"SCHEMA.md: group {group.group(1)}")
            attrs = f[group.group(1)].attrs
            paragraphs = [p for p in re.split(r"\n\s*\n", body)
                          if not (p.startswith("When `/eval` exists") and "eval" not in f)
                          and not (p.startswith("When train.leaf is set") and not leaf)
                          and not (p.startswith("Written by the C++ writers") and not by_cpp)
                          and not (p.startswith("Measured by sweep's trainer where") and not schedstat)
                          and not (p.startswith("Written by sweep's trainer when `train.spike_policy`")
                                   and "spike_decisions" not in attrs)
                          and not (p.startswith("Written by sweep's trainer for fp16 runs") and not fp16)
                          and not (p.startswith("Written by sweep's trainer when the fp16 loss scaler")
                                   and "fp16_overflows" not in attrs)
                          and not (p.startswith("Written by sweep's trainer when `train.on_nan: skip_step`")
                                   and "nonfinite_skips" not in attrs)
                          and not (p.startswith("Written by sweep's trainer for runs on more") and
                                   not (by_trainer and world > 1))
                          and not (p.startswith("Written by a program that declares")
                                   and "timing_metrics" not in attrs)
                          and not (p.startswith("Written by a Python program that asked where a forward")
                                   and "first_nonfinite_module" not in attrs)
                          and not (p.startswith("Written by python's sweep.init when the grid left keys")
                                   and "program.script_defaults" not in attrs)]
            for tok in re.findall(r"`([^`]+)`", "\n\n".join(paragraphs)):
                if " " in tok or "<" in tok or tok.startswith("comm.") or tok.startswith("/"):
                    continue  # an example value, a pattern, only written for multi-rank runs, or a group
                key = "env." + tok if tok.isupper() else tok
                expect(key in attrs, f"SCHEMA.md: {group.group(1)} attribute {key}")
                found += 1
        elif group:
            for name, typ in rows:
                path = group.group(1) + "/" + name
                ok = path in f and (typ not in TYPES or f[path].dtype == TYPES[typ])
                expect(ok, f"SCHEMA.md: dataset {path} ({typ})")
                found += 1
    expect(found > 40, f"SCHEMA.md documents {found} names (the parser found the tables)")


def by_trainer_of(env):
    return os.path.basename(as_text(env.get("trainer", ""))) == "sweep-train"


def as_text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def record_digest(f):
    """The digest of results/SCHEMA.md's "Integrity" section, from h5py and xxhash alone."""
    h = xxhash.xxh64(seed=0)

    def item(name, payload=b""):
        h.update(name.encode() + b"\0" + payload)

    def text(v):
        return as_text(v).encode() + b"\0"

    def nums(name, arr, dtype):
        item(name, np.ascontiguousarray(np.asarray(arr, dtype=dtype)).astype(np.dtype(dtype).newbyteorder("<")).tobytes())

    def attrs(name, group):
        item(name, b"".join(k.encode() + b"\0" + text(group.attrs[k]) for k in sorted(group.attrs, key=str.encode)))

    nums("schema_version", [f.attrs["schema_version"]], np.int64)
    for a in ("run_id", "sweep_id", "status", "failure"):
        item(a, text(f.attrs.get(a, "")))
    nums("world_size", [f.attrs.get("world_size", 1)], np.int64)
    if "lineage" in f.attrs:  # version 6: a run started from another run's checkpoint
        item("lineage", text(f.attrs["lineage"]))
        item("parent_run_id", text(f.attrs.get("parent_run_id", "")))
        nums("parent_step", [f.attrs.get("parent_step", 0)], np.int64)
    item("config/yaml", text(f["config/yaml"][()]))
    for d in ("keys", "values"):
        item("config/" + d, b"".join(text(v) for v in f["config/" + d][:]))
    attrs("environment", f["environment"])
    for d in ("name", "shape"):
        item("params/" + d, b"".join(text(v) for v in f["params/" + d][:]))
    for d in ("offset", "numel"):
        nums("params/" + d, f["params/" + d][:], np.int64)
    for d in ("loss", "lr", "grad_norm", "clip_coef", "loss_scale", "step_time_s", "tokens_per_s", "record_time_s"):
        nums("metrics/" + d, f["metrics/" + d][:], np.float64)
    for d in ("step", "skipped", "tokens", "unused_params"):
        nums("metrics/" + d, f["metrics/" + d][:], np.int64)
    nums("ranks/step_time_s", f["ranks/step_time_s"][:].ravel(), np.float64)
    if "params_bytes" in f["ranks"]:
        for d in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            nums("ranks/" + d, f["ranks/" + d][:], np.int64)
    if "step_peak_bytes" in f["ranks"]:
        for d in ("step_peak_bytes", "peak_rss_bytes"):
            nums("ranks/" + d, f["ranks/" + d][:], np.int64)
    attrs("summary", f["summary"])
    nums("checksums/step", f["checksums/step"][:], np.int64)
    nums("checksums/params", f["checksums/params"][:], np.uint64)
    tensors = f["checksums/tensors"][:].ravel() if len(f["params/name"]) else []
    nums("checksums/tensors", tensors, np.uint64)
    if "eval" in f:  # version 3: held-out evaluations, only in runs that had them
        nums("eval/step", f["eval/step"][:], np.int64)
        nums("eval/loss", f["eval/loss"][:], np.float64)
        nums("eval/tokens", f["eval/tokens"][:], np.int64)
        nums("eval/time_s", f["eval/time_s"][:], np.float64)
    for group in ("metrics", "eval"):  # version 4: a program's own figures, by name
        if group in f and "extra" in f[group]:
            for name in sorted(f[group]["extra"].keys(), key=lambda n: n.encode()):
                nums(group + "/extra/" + name, f[group]["extra"][name][:], np.float64)
    if "grad_norm" in f["ranks"]:  # version 5: gradient telemetry
        nums("ranks/grad_norm", f["ranks/grad_norm"][:].ravel(), np.float64)
    if "telemetry" in f:
        nums("telemetry/step", f["telemetry/step"][:], np.int64)
        item("telemetry/why", b"".join(text(v) for v in f["telemetry/why"][:]))
        norms = f["telemetry/tensor_grad_norm"][:].ravel() if len(f["params/name"]) else []
        nums("telemetry/tensor_grad_norm", norms, np.float64)
        if "moe_shape" in f["telemetry"]:
            nums("telemetry/moe_shape", f["telemetry/moe_shape"][:], np.int64)
            nums("telemetry/routed_tokens", f["telemetry/routed_tokens"][:].ravel(), np.int64)
    return "xxh64:%016x" % h.intdigest()


bin_dir, config = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "run")
    subprocess.run([os.path.join(bin_dir, "sweep-train"), "--config", config, "--out", out, "--quiet"], check=True)
    failures, checks = [], []

    def expect(cond, what):
        checks.append(what)
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with h5py.File(os.path.join(out, "record.h5"), "r") as f:
        expect(int(f.attrs["schema_version"]) == 5, "schema_version == 5 (gradient telemetry)")
        digest = record_digest(f)
        expect(as_text(f.attrs["digest"]) == digest,
               f"digest recomputed from SCHEMA.md's Integrity section ({digest}) equals the stored one")
        expect(len(f.attrs["run_id"]) == 16, "run_id is 16 hex digits")
        expect(f.attrs["status"] == "completed", "status == completed")
        yaml_text = f["config/yaml"][()].decode()
        expect("train:" in yaml_text and "steps: 12" in yaml_text, "config/yaml holds the resolved config")
        steps = f["metrics/step"][:]
        loss = f["metrics/loss"]
        expect(list(steps) == list(range(1, 13)), "metrics/step is 1..12")
        expect(loss.dtype == np.float64 and loss.shape == (12,), "metrics/loss is float64, one per step")
        expect(bool(np.all(np.isfinite(loss[:]))), "losses are finite")
        # Gradient telemetry: at step 10 (train.telemetry_every) and the last; each
        # tensor's norm combines to the step's global norm; one rank's own is the global.
        tm_steps = list(f["telemetry/step"][:])
        expect(tm_steps == [10, 12], f"telemetry/step: 10 and the last, 12 ({tm_steps})")
        expect([as_text(w) for w in f["telemetry/why"][:]] == ["every", "last"], "telemetry/why: every, last")
        tn = f["telemetry/tensor_grad_norm"][:]
        expect(tn.shape == (2, len(f["params/name"])), "telemetry/tensor_grad_norm: a norm per tensor per row")
        gn = f["metrics/grad_norm"][:]
        expect(abs(float(np.sqrt((tn[1] ** 2).sum())) - gn[11]) <= 1e-9 * gn[11],
               "the tensors' norms at step 12 combine to metrics/grad_norm")
        expect(f["ranks/grad_norm"].shape == (12, 1) and np.array_equal(f["ranks/grad_norm"][:, 0], gn),
               "ranks/grad_norm: one rank's own norm is the global norm at every step")
        expect(list(f["eval/step"][:]) == [4, 8, 12], "eval/step: after steps 4, 8 and 12 (train.eval_every 4)")
        ev = f["eval/loss"][:]
        expect(bool(np.all(np.isfinite(ev))) and ev[-1] < ev[0], f"held-out loss is finite and falls ({ev})")
        expect(list(f["eval/tokens"][:]) == [2 * 2 * 2 * 16] * 3, "eval/tokens: 2 batches of 2 micro-batches of 2 x 16")
        params = f["checksums/params"]
        expect(list(f["checksums/step"][:]) == list(range(0, 13)), "checksums/step is 0 (initial) then every step")
        ranks = f["ranks"]
        held = int(ranks["params_bytes"][0] + ranks["grads_bytes"][0] + ranks["optimizer_bytes"][0])
        peak, rss = int(ranks["step_peak_bytes"][0]), int(ranks["peak_rss_bytes"][0])
        expect(peak > held, f"the step's peak ({peak} B) exceeds what is held between steps ({held} B): activations")
        expect(rss > peak, f"the peak resident set ({rss} B) exceeds the step's peak ({peak} B)")
        expect(params.dtype == np.uint64 and params.shape == (13,), "checksums/params is uint64, one per step")
        expect(len(set(params[:].tolist())) == 13, "parameters change every step")
        names = [n.decode() for n in f["params/name"][:]]
        expect(f["checksums/tensors"].shape == (13, len(names)), "one hash per parameter tensor per checksum")
        expect("blas" in f["environment"].attrs and "OpenBLAS" in f["environment"].attrs["blas"],
               "environment names the BLAS (OpenBLAS)")
        check_schema_doc(f, expect)
    print(f"h5py: {len(checks) - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)
