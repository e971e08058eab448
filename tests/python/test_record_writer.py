#!/usr/bin/python3
"""python/sweep_record against the C++ side: its checksums against the values the C++
code computed, its records read by the `sweep` binary, h5py's schema check, the digest,
and the .partial -> record.h5 life cycle.

Usage: test_record_writer.py [BIN_DIR] [unittest options]
BIN_DIR holds sweep and sweep-train (ctest passes ${CMAKE_BINARY_DIR}/bin). Without it,
$SWEEP_BIN_DIR or <repo>/build/bin is used, and the tests that need the binaries are
skipped when they are not there; with it given, missing binaries fail.

What the checksum tests prove, and what not:
* flat_checksum of the ramp of tests/unit/checksum_test.cpp equals the literal that test
  pins for the C++ flat_checksum (read from that file); results_test runs the C++ side.
* sweep-train (the real C++ trainer) checkpoints its flat parameter vector
  (checkpoints/step_N/state.bin, trainer/checkpoint/checkpoint.cpp) and records
  checksums of it at the same steps: the Python flat_checksum, tensor_checksum and
  checksums_of of the checkpointed values equal the C++ values in the record, for a
  model of one checksum block and one of two (tensors straddling the block boundary).
  The step-0 (initial) parameters are not checkpointed, so their row is not compared.
"""

import ast
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import tempfile
import unittest
import warnings

import h5py
import numpy as np

# h5py_reads_record.py's check_schema_doc (reused below, not ours to edit) leaves SCHEMA.md open.
warnings.filterwarnings("ignore", category=ResourceWarning, message=r"unclosed file .*SCHEMA\.md")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
try:
    import sweep_record as sr
except ImportError:  # run in place without PYTHONPATH
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import sweep_record as sr

BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")
BIN_GIVEN = bool(os.environ.get("SWEEP_BIN_DIR"))
TIMEOUT = 300


def binary(name):
    return os.path.join(BIN_DIR, name)


def need_binaries(test, *names):
    missing = [n for n in names if not os.access(binary(n), os.X_OK)]
    if not missing:
        return
    msg = f"{', '.join(missing)} not in {BIN_DIR} (build it, or pass the bin dir)"
    if BIN_GIVEN:
        test.fail(msg)
    test.skipTest(msg)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def sweep(*args):
    return run([binary("sweep")] + list(args))


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def read_file(path, mode="r"):
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
        return f.read()


# ---------------------------------------------------------------- records written here

MLP_SHAPES = [("fc1.weight", (16, 8)), ("fc1.bias", (16,)), ("fc2.weight", (4, 16)), ("fc2.bias", (4,))]


def mlp_params(seed):
    rng = np.random.default_rng(seed)
    return [(n, rng.standard_normal(s).astype(np.float32)) for n, s in MLP_SHAPES]


def config_of(lr, seed):
    yaml = f"model:\n  kind: py_mlp\n  hidden: 16\ntrain:\n  steps: 3\n  lr: {lr}\n  seed: {seed}\n"
    pairs = [("model.kind", "py_mlp"), ("model.hidden", "16"), ("train.steps", "3"), ("train.lr", lr),
             ("train.seed", str(seed))]
    return yaml, pairs


def write_record(path, lr="0.1", seed=0, steps=3, loss_bump_at=None, abandon_at=None, mfu=None, timing=(),
                 rank_grad_norms=False):
    """A small "training run" recorded as a Python trainer would; returns what it wrote.
    `mfu`: a figure of its own at every step; `timing`: the metrics it declares timing;
    `rank_grad_norms`: the one rank's gradient norm at every step (gradient telemetry)."""
    yaml, pairs = config_of(lr, seed)
    ps = mlp_params(seed)
    env = {"device": "cpu", "sweep_version": "test", "trainer": os.path.abspath(__file__),
           "trainer.models": "py_mlp", "data.entropy_floor": "1.0"}
    wrote = {"loss": [], "checksums": []}
    with sr.RecordWriter(path, config_yaml=yaml, config=pairs, environment=env,
                         params=[(n, a.shape) for n, a in ps]) as w:
        wrote["run_id"] = w.run_id
        w.declare_timing(*timing)
        ck = sr.checksums_of(ps)
        w.append_checksum(0, *ck)
        wrote["checksums"].append((0,) + ck)
        for step in range(1, steps + 1):
            for _, a in ps:
                a *= np.float32(1.0 - float(lr) * 0.1)
            loss = 2.5 / step + (0.125 if step == loss_bump_at else 0.0)
            w.append_step({"step": step, "loss": loss, "lr": float(lr), "grad_norm": 0.5 / step, "tokens": 64,
                           "step_time_s": 0.01, "tokens_per_s": 6400.0, "record_time_s": 0.001},
                          extra=None if mfu is None else {"mfu": mfu})
            w.append_rank_times([0.01])
            if rank_grad_norms:
                w.append_rank_grad_norms([0.5 / step])
            ck = sr.checksums_of(ps)
            w.append_checksum(step, *ck)
            wrote["loss"].append(loss)
            wrote["checksums"].append((step,) + ck)
            if step == abandon_at:
                raise RuntimeError(f"simulated failure at step {step}")
        w.set_memory([1024], [1024], [2048], step_peak=[4096], peak_rss=[1 << 20])
        w.set_summary("stragglers", "")
        w.set_summary("rank_compute_median_s", "0.009")
        w.set_summary("nonfinite_steps_skipped", "0")
        w.finish()
    return wrote


# ---------------------------------------------------------------- 1. checksums

def read_checkpoint_params(state_bin):
    """(step, flat fp32 parameters) of sweep-train's state.bin (trainer/checkpoint/checkpoint.cpp:
    magic, uint32 version, str run_id, [str math_id from version 2], int64 step, vec<float>
    params; a str or vec is a uint64 length then its bytes)."""
    buf = read_file(state_bin, "rb")
    if buf[:8] != b"SWPCKPT\n":
        raise AssertionError(f"{state_bin}: not a sweep checkpoint")
    (version,) = struct.unpack_from("<I", buf, 8)
    if version not in (1, 2, 3, 4, 5, 6):  # 3 to 6 append rows, lineage, decisions, kept states after it
        raise AssertionError(f"{state_bin}: checkpoint version {version}; this test reads 1 to 6")
    pos = 12
    for _ in range(2 if version >= 2 else 1):  # run_id, math_id
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
    (step,) = struct.unpack_from("<q", buf, pos)
    (n,) = struct.unpack_from("<Q", buf, pos + 8)
    return step, np.frombuffer(buf, dtype="<f4", count=n, offset=pos + 16)


class ChecksumsMatchCpp(unittest.TestCase):
    def test_literal_pinned_by_checksum_test_cpp(self):
        src = read_file(os.path.join(ROOT, "tests", "unit", "checksum_test.cpp"))
        m = re.search(r"std::vector<float> ramp\((\d+)\);.*?ramp\[i\] = float\(i\) \* 0\.5f;.*?"
                      r"EXPECT_EQ\(flat_checksum\(ramp\.data\(\), ramp\.size\(\)\), (0x[0-9a-f]+)ull\)", src, re.S)
        self.assertIsNotNone(m, "checksum_test.cpp no longer pins flat_checksum of the 0.5-step ramp")
        ramp = np.arange(int(m.group(1)), dtype=np.float32) * np.float32(0.5)
        want = int(m.group(2), 16)
        self.assertEqual(sr.flat_checksum(ramp), want, f"flat_checksum of the ramp != {m.group(2)} (C++)")
        self.assertEqual(sr.checksums_of([("a", ramp[:70001]), ("b", ramp[70001:])])[0], want)
        self.assertGreater(len(ramp), sr.CHECKSUM_BLOCK, "the pinned ramp spans more than one block")

    def test_checksums_of_trainer_checkpoints(self):
        need_binaries(self, "sweep-train")
        tiny = read_file(os.path.join(ROOT, "tests", "data", "tiny_run.yaml"))
        model_line = next(line for line in tiny.splitlines(keepends=True) if line.startswith("model:"))
        wide_line = "model: {layers: 2, d_model: 64, heads: 2, vocab: 64, seq_len: 16}\n"
        for label, line in (("tiny_run.yaml's model", model_line), ("two-block model", wide_line)):
            with self.subTest(label), tempfile.TemporaryDirectory() as tmp:
                self.check_trainer_run(tmp, line, two_blocks=label != "tiny_run.yaml's model")

    def check_trainer_run(self, tmp, model_line, two_blocks):
        cfg = os.path.join(tmp, "c.yaml")
        with open(cfg, "w") as f:
            f.write(model_line)
            f.write("data: {kind: synthetic, seed: 0, branching: 4}\n"
                    "train: {steps: 3, micro_batch: 2, accum: 2, lr: 3.0e-3, warmup: 2, min_lr: 3.0e-4, "
                    "clip_norm: 1.0, checksum_every: 1, checkpoint_every: 1, keep_checkpoints: 10}\n")
        out = os.path.join(tmp, "run")
        p = run([binary("sweep-train"), "--config", cfg, "--out", out, "--quiet"])
        self.assertEqual(p.returncode, 0, p.stderr)
        with h5py.File(os.path.join(out, "record.h5"), "r") as f:
            self.assertEqual(sr.run_id_of(text(f["config/yaml"][()])), text(f.attrs["run_id"]),
                             "run_id_of(config/yaml) is the C++ run id")
            self.assertEqual(sr.record_digest(f), text(f.attrs["digest"]),
                             "record_digest of the C++ writer's record is its stored digest")
            names = [text(n) for n in f["params/name"][:]]
            shapes = [tuple(int(d) for d in text(s).split("x")) for s in f["params/shape"][:]]
            offsets, numels = f["params/offset"][:], f["params/numel"][:]
            rows = {int(s): i for i, s in enumerate(f["checksums/step"][:])}
            ck_params, ck_tensors = f["checksums/params"][:], f["checksums/tensors"][:]
        ckpt_root = os.path.join(out, "checkpoints")
        compared = 0
        for d in sorted(os.listdir(ckpt_root)):
            step, flat = read_checkpoint_params(os.path.join(ckpt_root, d, "state.bin"))
            self.assertEqual(len(flat), int(offsets[-1] + numels[-1]), "checkpoint holds the whole flat vector")
            if two_blocks:
                self.assertGreater(len(flat), sr.CHECKSUM_BLOCK)
                self.assertTrue(any(o < sr.CHECKSUM_BLOCK < o + n for o, n in zip(offsets, numels)),
                                "a tensor straddles the first block boundary")
            else:
                self.assertLessEqual(len(flat), sr.CHECKSUM_BLOCK)
            row = rows[step]
            want_params, want_tensors = int(ck_params[row]), [int(t) for t in ck_tensors[row]]
            self.assertEqual(sr.flat_checksum(flat), want_params, f"flat_checksum at step {step}")
            tensors = [flat[o:o + n].reshape(s) for o, n, s in zip(offsets, numels, shapes)]
            self.assertEqual([sr.tensor_checksum(t) for t in tensors], want_tensors, f"tensor_checksum at {step}")
            self.assertEqual(sr.checksums_of(list(zip(names, tensors))), (want_params, want_tensors),
                             f"checksums_of at step {step}")
            flipped = flat.copy()
            flipped.view("<u4")[len(flat) // 2] ^= 1  # control: the comparison is not vacuous
            self.assertNotEqual(sr.flat_checksum(flipped), want_params)
            compared += 1
        self.assertGreaterEqual(compared, 2, "checkpoints at steps 1 and 2 were compared")


    def test_a_cpp_record_rewritten_by_python_is_identical(self):
        """The C++ writer's record of a real sweep-train run, read with h5py and written
        again through the Python writer: `sweep compare` says identical, and the two
        records' digests (over every recorded value) are equal."""
        need_binaries(self, "sweep-train", "sweep")
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "c.yaml")
            with open(cfg, "w") as f:
                f.write("model: {layers: 1, d_model: 32, heads: 2, vocab: 64, seq_len: 16}\n"
                        "train: {steps: 4, micro_batch: 2, accum: 2, lr: 3.0e-3, clip_norm: 1.0}\n")
            cpp = os.path.join(tmp, "cpp")
            p = run([binary("sweep-train"), "--config", cfg, "--out", cpp, "--quiet"])
            self.assertEqual(p.returncode, 0, p.stderr)
            py = os.path.join(tmp, "py")
            with h5py.File(os.path.join(cpp, "record.h5"), "r") as f:
                env = {k: text(v) for k, v in f["environment"].attrs.items()}
                pairs = list(zip((text(k) for k in f["config/keys"][:]), (text(v) for v in f["config/values"][:])))
                shapes = [tuple(int(d) for d in text(s).split("x")) for s in f["params/shape"][:]]
                params = list(zip((text(n) for n in f["params/name"][:]), shapes))
                m = {k: f["metrics"][k][:] for k in f["metrics"]}
                with sr.RecordWriter(py, run_id=text(f.attrs["run_id"]), config_yaml=text(f["config/yaml"][()]),
                                     config=pairs, environment=env, params=params,
                                     sweep_id=text(f.attrs.get("sweep_id", "")),
                                     world_size=int(f.attrs.get("world_size", 1))) as rec:
                    for i in range(len(m["step"])):
                        rec.append_step({k: v[i].item() for k, v in m.items()})
                        rec.append_rank_grad_norms(list(f["ranks/grad_norm"][i]))  # version 5
                    for row, step in enumerate(f["checksums/step"][:]):
                        rec.append_checksum(int(step), int(f["checksums/params"][row]),
                                            [int(t) for t in f["checksums/tensors"][row]])
                    for times in f["ranks/step_time_s"][:]:
                        rec.append_rank_times(list(times))
                    for row, step in enumerate(f["telemetry/step"][:]):
                        rec.append_telemetry(int(step), text(f["telemetry/why"][row]),
                                             list(f["telemetry/tensor_grad_norm"][row]))
                    r = f["ranks"]
                    rec.set_memory(list(r["params_bytes"][:]), list(r["grads_bytes"][:]),
                                   list(r["optimizer_bytes"][:]), list(r["step_peak_bytes"][:]),
                                   list(r["peak_rss_bytes"][:]))
                    for k, v in f["summary"].attrs.items():
                        rec.set_summary(k, text(v))
                    rec.finish()
            c = run([binary("sweep"), "compare", cpp, py])
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
            self.assertIn("identical bit-for-bit: 4 steps, 5 checksums", c.stdout)
            self.assertEqual(sr.stored_digest(os.path.join(py, "record.h5")),
                             sr.stored_digest(os.path.join(cpp, "record.h5")),
                             "the same contents give the same digest from either writer")


# ---------------------------------------------------------------- 2. the C++ side reads them

class CppReadsPythonRecords(unittest.TestCase):
    def setUp(self):
        need_binaries(self, "sweep")
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_compare_identical_and_different(self):
        a, b, c = (os.path.join(self.dir, x) for x in "abc")
        write_record(a)
        write_record(b)
        write_record(c, loss_bump_at=2)
        p = sweep("compare", a, b)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("identical bit-for-bit: 3 steps, 4 checksums", p.stdout)
        p = sweep("compare", os.path.join(a, "record.h5"), c)  # a file or its run directory
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("diverged at step 2: loss 1.25 vs 1.375", p.stdout)

    def test_a_declared_timing_metric_is_shown_apart_not_compared(self):
        """declare_timing (results/analysis/timing_metrics.h): /summary timing_metrics, and
        compare leaves the metric out of its bits and shows its means."""
        a, b, c, d = (os.path.join(self.dir, x) for x in "abcd")
        write_record(a, mfu=0.5, timing=("mfu", "mfu"))
        write_record(b, mfu=0.25)
        write_record(c, mfu=0.25)
        write_record(d, mfu=0.5)
        with h5py.File(os.path.join(a, "record.h5"), "r") as f:
            self.assertEqual(f["summary"].attrs["timing_metrics"], "mfu")
        p = sweep("compare", a, b)  # one side's declaration is the program's word for the figure
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("identical bit-for-bit: 3 steps, 4 checksums", p.stdout)
        self.assertIn("timing metrics (not compared bit for bit), means: mfu 0.5 vs 0.25, record_time_s 0.001 vs "
                      "0.001, step_time_s 0.01 vs 0.01, tokens_per_s 6400 vs 6400\n", p.stdout)
        p = sweep("compare", d, c)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("but the program's own metric mfu differs at step 1", p.stdout)
        with sr.RecordWriter(os.path.join(self.dir, "e"), config_yaml="a: 1\n") as w:
            for bad in ("my mfu", "", "../x"):
                with self.assertRaises(ValueError, msg=bad):
                    w.declare_timing(bad)
            w.finish()

    def test_report_over_a_sweep_directory(self):
        sweep_dir = os.path.join(self.dir, "pysweep")
        runs = {}
        for lr in ("0.1", "0.2"):
            yaml, _ = config_of(lr, 0)
            rid = sr.run_id_of(yaml)
            runs[rid] = write_record(os.path.join(sweep_dir, "runs", rid), lr=lr)
        yaml, _ = config_of("0.3", 0)
        failed_id = sr.run_id_of(yaml)
        with self.assertRaises(RuntimeError):
            write_record(os.path.join(sweep_dir, "runs", failed_id), lr="0.3", abandon_at=2)
        p = sweep("report", sweep_dir, "--format", "json", "-o", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        rep = json.loads(p.stdout)
        self.assertEqual(sorted(r["run_id"] for r in rep["runs"]), sorted(runs))
        for r in rep["runs"]:
            wrote = runs[r["run_id"]]
            self.assertEqual(r["status"], "completed")
            self.assertEqual(r["steps"], 3)
            self.assertEqual(r["final_loss"], wrote["loss"][-1])
            self.assertEqual(r["final_params_checksum"], "%016x" % wrote["checksums"][-1][1])
        self.assertEqual([(f["run_id"], f["status"]) for f in rep["failed"]], [(failed_id, "failed")])
        self.assertIn("RuntimeError: simulated failure at step 2", rep["failed"][0]["cause"])
        self.assertEqual(rep["summary"]["completed"], 2)
        p = sweep("report", sweep_dir)  # the default: HTML into the sweep directory
        self.assertEqual(p.returncode, 0, p.stderr)
        html = read_file(os.path.join(sweep_dir, "report.html"))
        self.assertTrue(all(rid in html for rid in runs))


# ---------------------------------------------------------------- 3. h5py's schema check

def load_h5py_checks():
    """check_schema_doc and record_digest of tests/e2e/h5py_reads_record.py: its top-level
    definitions up to the first statement that reads sys.argv (where its own run starts)."""
    path = os.path.join(ROOT, "tests", "e2e", "h5py_reads_record.py")
    tree = ast.parse(read_file(path), path)
    body = []
    for node in tree.body:
        if any(isinstance(n, ast.Attribute) and n.attr == "argv" for n in ast.walk(node)):
            break
        body.append(node)
    ns = {"__file__": path, "__name__": "h5py_reads_record_defs"}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    for name in ("check_schema_doc", "record_digest", "as_text"):
        if name not in ns:
            raise AssertionError(f"{path} no longer defines {name}() before its run")
    return ns


class H5pySchemaCheck(unittest.TestCase):
    def test_python_record_passes_h5py_reads_record_checks(self):
        checks = load_h5py_checks()
        with tempfile.TemporaryDirectory() as tmp:
            write_record(tmp)
            failures, passed = [], []

            def expect(cond, what):
                (passed if cond else failures).append(what)

            with h5py.File(os.path.join(tmp, "record.h5"), "r") as f:
                expect(int(f.attrs["schema_version"]) == 3, "schema_version == 3")
                digest = checks["record_digest"](f)
                expect(checks["as_text"](f.attrs["digest"]) == digest,
                       f"digest recomputed by h5py_reads_record.py ({digest}) equals the stored one")
                expect(re.fullmatch(r"[0-9a-f]{16}", checks["as_text"](f.attrs["run_id"])) is not None,
                       "run_id is 16 hex digits")
                expect(f.attrs["status"] == "completed", "status == completed")
                expect(list(f["metrics/step"][:]) == [1, 2, 3], "metrics/step is 1..3")
                expect(f["metrics/loss"].dtype == np.float64, "metrics/loss is float64")
                expect(list(f["checksums/step"][:]) == [0, 1, 2, 3], "checksums/step is 0 then every step")
                expect(f["checksums/tensors"].shape == (4, len(MLP_SHAPES)), "one hash per tensor per row")
                checks["check_schema_doc"](f, expect)
            self.assertEqual(failures, [], f"{len(passed)} checks passed")
            self.assertGreater(len(passed), 40)

    def test_a_record_declaring_timing_metrics_passes_them_too(self):
        """The summary's timing_metrics paragraph of SCHEMA.md applies when it is written."""
        checks = load_h5py_checks()
        with tempfile.TemporaryDirectory() as tmp:
            write_record(tmp, mfu=0.5, timing=("mfu",))
            failures, passed = [], []
            with h5py.File(os.path.join(tmp, "record.h5"), "r") as f:
                checks["check_schema_doc"](f, lambda ok, what: (passed if ok else failures).append(what))
                self.assertEqual(checks["as_text"](f.attrs["digest"]), checks["record_digest"](f))
            self.assertEqual(failures, [], f"{len(passed)} checks passed")
            self.assertIn("SCHEMA.md: /summary attribute timing_metrics", passed)


class ContainerKeys(unittest.TestCase):
    def test_the_image_the_driver_names_is_recorded(self):
        """container.* come from the driver's SWEEP_CONTAINER_* (empty on the host), as in
        results/program_env.cpp."""
        names = {"SWEEP_CONTAINER_RUNTIME": "charliecloud", "SWEEP_CONTAINER_IMAGE": "/img/sweep",
                 "SWEEP_CONTAINER_DIGEST": "xxh3:0123456789abcdef"}
        saved = {k: os.environ.pop(k, None) for k in names}
        try:
            env = sr.environment_defaults()
            self.assertEqual([env[k] for k in ("container.runtime", "container.image", "container.digest")],
                             ["", "", ""])
            os.environ.update(names)
            env = sr.environment_defaults()
            self.assertEqual([env[k] for k in ("container.runtime", "container.image", "container.digest")],
                             list(names.values()))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v


class SchemaVersions(unittest.TestCase):
    """One schema version per language: results/record/record.h kSchemaVersion, the newest
    the C++ reader reads (it reads 1 to it), and writer.py's SCHEMA_VERSIONS, those the
    Python writer writes (SCHEMA_VERSION the newest); every other statement names them."""

    def cpp_version(self):
        header = os.path.join(ROOT, "results", "record", "record.h")
        m = re.search(r"\bkSchemaVersion = (\d+);", read_file(header))
        self.assertIsNotNone(m, "kSchemaVersion = N; in " + header)
        return int(m.group(1))

    def test_every_version_python_writes_is_one_cpp_reads(self):
        newest = self.cpp_version()
        self.assertEqual(list(sr.SCHEMA_VERSIONS), sorted(set(sr.SCHEMA_VERSIONS)), "oldest first, each once")
        self.assertEqual(sr.SCHEMA_VERSION, sr.SCHEMA_VERSIONS[-1])
        for v in sr.SCHEMA_VERSIONS:
            self.assertTrue(1 <= v <= newest, f"Python writes version {v}; the C++ reader reads 1 to {newest}")

    def test_schema_md_is_the_version_cpp_reads(self):
        doc = read_file(os.path.join(ROOT, "results", "SCHEMA.md"))
        m = re.search(r"^# Run record schema \(version (\d+)\)$", doc, re.M)
        self.assertIsNotNone(m, "results/SCHEMA.md: heading '# Run record schema (version N)'")
        self.assertEqual(int(m.group(1)), self.cpp_version())

    def test_the_python_docs_state_no_version_number(self):
        """The package's docstrings, pyproject.toml and python/README.md name the constants."""
        for rel in ("python/pyproject.toml", "python/README.md", "python/sweep_record/__init__.py",
                    "python/sweep_record/writer.py"):
            for n, line in enumerate(read_file(os.path.join(ROOT, rel)).splitlines(), 1):
                self.assertIsNone(re.search(r"\bversion \d", line, re.I), f"{rel}:{n}: {line.strip()}")

    def test_each_version_is_what_a_record_gets(self):
        """A plain record has the first; a figure of the program's own raises it; gradient
        telemetry raises it to the newest; `sweep show` reads each as verified."""
        cases = [({}, sr.SCHEMA_VERSIONS[0]), ({"mfu": 0.5}, sr.writer.EXTRA_SCHEMA_VERSION),
                 ({"mfu": 0.5, "rank_grad_norms": True}, sr.SCHEMA_VERSION)]
        self.assertEqual(sorted({v for _, v in cases}), list(sr.SCHEMA_VERSIONS), "a case for every version")
        with tempfile.TemporaryDirectory() as tmp:
            for i, (kw, version) in enumerate(cases):
                path = os.path.join(tmp, str(i))
                write_record(path, **kw)
                with h5py.File(os.path.join(path, "record.h5"), "r") as f:
                    self.assertEqual(int(f.attrs["schema_version"]), version, kw)
                if os.access(binary("sweep"), os.X_OK) or BIN_GIVEN:
                    p = sweep("show", path)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertIn("verdict:     verified by its digest", p.stdout)
                    self.assertIn(f"schema:      {version},", p.stdout)


class StepMetricsColumns(unittest.TestCase):
    """digest.py's STEP_FIELDS, the one Python list of the built-in step metrics, is the C++
    StepMetrics: its fields in order, their types and defaults, and record.cpp's columns."""

    def test_step_fields_are_the_cpp_struct(self):
        header = os.path.join(ROOT, "include", "sweep", "record_format.h")
        body = re.search(r"^struct StepMetrics \{\n(.*?)^\};", read_file(header), re.S | re.M)
        self.assertIsNotNone(body, "struct StepMetrics in " + header)
        fields = re.findall(r"^\s*(int64_t|double) (\w+) = ([-\d.]+);", body.group(1), re.M)
        self.assertEqual(len(fields), len(body.group(1).strip().splitlines()), "one `type name = default;` a line")
        self.assertEqual([name for _, name, _ in fields], list(sr.STEP_FIELDS), "the fields, in order")
        for ctype, name, default in fields:
            ours = sr.STEP_FIELDS[name]
            if name == "step":  # 1-based and always given: no default
                self.assertIsNone(ours)
                continue
            self.assertIs(type(ours), int if ctype == "int64_t" else float, f"{name}: {ctype}")
            self.assertEqual(ours, float(default), name)

    def test_digest_columns_are_record_cpp_columns(self):
        """The digest hashes the columns in SWEEP_DOUBLE_METRICS then SWEEP_INT_METRICS order."""
        macros = {}
        for dirpath, _, files in os.walk(os.path.join(ROOT, "results", "record")):
            for name in files:
                if name.endswith((".cpp", ".h")):
                    src = read_file(os.path.join(dirpath, name))
                    for kind, body in re.findall(r"#define SWEEP_(DOUBLE|INT)_METRICS\(X\)((?:.*\\\n)*.*)", src):
                        macros[kind] = tuple(re.findall(r"X\((\w+)\)", body))
        self.assertEqual(sorted(macros), ["DOUBLE", "INT"], "SWEEP_DOUBLE_METRICS and SWEEP_INT_METRICS in results/record/")
        self.assertEqual(macros["DOUBLE"], sr.digest.DOUBLE_METRICS)
        self.assertEqual(macros["INT"], sr.digest.INT_METRICS)

    def test_sweep_init_builtins_are_the_step_fields(self):
        """sweep.init()'s log() keeps these in the record's columns, anything else as extra."""
        from sweep import run as sweep_run
        self.assertEqual(set(sweep_run._BUILTIN), set(sr.STEP_FIELDS) - {"step"})


class NumericsVariables(unittest.TestCase):
    def test_one_list_in_both_languages(self):
        """writer.py's NUMERICS_ENV is include/sweep/record_writer.h's kNumericsEnv, in its order."""
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "sweep", "record_writer.h")
        with open(header, encoding="utf-8") as f:
            text = f.read()
        block = re.search(r"kNumericsEnv\[\] = \{(.*?)\};", text, re.S)
        self.assertIsNotNone(block, "kNumericsEnv in " + header)
        self.assertEqual(tuple(re.findall(r'"([A-Z0-9_]+)"', block.group(1))), sr.NUMERICS_ENV)
        self.assertIn("ATEN_CPU_CAPABILITY", sr.NUMERICS_ENV)

    def test_slurm_provenance_is_one_list_in_both_languages(self):
        """writer.py's SLURM_ENV is record_writer.h's kSlurmEnv, and each key holds its variable."""
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "sweep", "record_writer.h")
        with open(header, encoding="utf-8") as f:
            block = re.search(r"kSlurmEnv\[\]\[2\] = \{(.*?)\};", f.read(), re.S)
        self.assertIsNotNone(block, "kSlurmEnv in " + header)
        self.assertEqual(tuple(re.findall(r'\{"([a-z_.]+)", "([A-Z_]+)"\}', block.group(1))), sr.SLURM_ENV)
        os.environ["SLURM_JOB_PARTITION"] = "debug"
        try:
            self.assertEqual(sr.environment_defaults()["slurm.partition"], "debug")
        finally:
            del os.environ["SLURM_JOB_PARTITION"]

    def test_instruction_set_is_recorded(self):
        env = sr.environment_defaults()
        self.assertIn(env["cpu.isa"], ("amx_bf16", "avx512_bf16", "avx512", "avx2", "baseline"))
        self.assertIn("env.ATEN_CPU_CAPABILITY", env)


# ---------------------------------------------------------------- 4. the digest

class DigestGuardsTheRecord(unittest.TestCase):
    def test_changed_metric_is_refused_by_sweep_compare(self):
        need_binaries(self, "sweep")
        with tempfile.TemporaryDirectory() as tmp:
            good, bad = os.path.join(tmp, "good"), os.path.join(tmp, "bad")
            write_record(good)
            write_record(bad)
            p = sweep("compare", good, bad)
            self.assertEqual(p.returncode, 0, "before the change the two are accepted: " + p.stdout + p.stderr)
            bad_file = os.path.join(bad, "record.h5")
            with h5py.File(bad_file, "r+") as f:
                f["metrics/loss"][1] = f["metrics/loss"][1] + 1e-9
            self.assertNotEqual(sr.record_digest(bad_file), sr.stored_digest(bad_file))
            p = sweep("compare", good, bad)
            self.assertNotEqual(p.returncode, 0, p.stdout)
            self.assertIn(bad_file + ": integrity check failed", p.stderr)


# ---------------------------------------------------------------- 5. the life cycle

class LifeCycle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run = os.path.join(self.tmp.name, "run")
        self.record = os.path.join(self.run, "record.h5")
        self.partial = self.record + ".partial"

    def tearDown(self):
        self.tmp.cleanup()

    def attrs_of_partial(self):
        with h5py.File(self.partial, "r") as f:
            return {k: text(v) for k, v in f.attrs.items()}

    def test_only_finish_completes(self):
        yaml, pairs = config_of("0.1", 0)
        with sr.RecordWriter(self.run, config_yaml=yaml, config=pairs, params=MLP_SHAPES) as w:
            self.assertTrue(os.path.exists(self.partial))
            self.assertFalse(os.path.exists(self.record))
            w.append_step(step=1, loss=1.0)
            w.flush()
            self.assertFalse(os.path.exists(self.record))
            w.finish()
            self.assertTrue(os.path.exists(self.record))
            self.assertFalse(os.path.exists(self.partial))
            with self.assertRaises(sr.RecordError):
                w.append_step(step=2, loss=1.0)
        with h5py.File(self.record, "r") as f:
            self.assertEqual(text(f.attrs["status"]), "completed")
            self.assertEqual(text(f.attrs["digest"]), sr.record_digest(f))

    def test_a_child_forked_while_the_record_is_open_does_not_stop_it_completing(self):
        # A DataLoader worker or a helper forked mid-run inherits the record's file
        # descriptor; one still alive at finish() held HDF5's lock on it, and finish()
        # failed with EAGAIN (seen as a flake of the process-tree soak under load).
        yaml, pairs = config_of("0.1", 0)
        with sr.RecordWriter(self.run, config_yaml=yaml, config=pairs, params=MLP_SHAPES) as w:
            w.append_step(step=1, loss=1.0)
            pid = os.fork()
            if pid == 0:
                time.sleep(5)  # keeps every inherited descriptor open
                os._exit(0)
            try:
                w.finish()
            finally:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        self.assertTrue(os.path.exists(self.record))
        with h5py.File(self.record, "r") as f:
            self.assertEqual(text(f.attrs["status"]), "completed")

    def test_exception_leaves_a_failed_partial(self):
        with self.assertRaises(ZeroDivisionError):
            with sr.RecordWriter(self.run, config_yaml="a: 1\n", params=MLP_SHAPES) as w:
                w.append_step(step=1, loss=0.5)
                1 / 0
        self.assertFalse(os.path.exists(self.record))
        self.assertEqual(sorted(os.listdir(self.run)), ["record.h5.partial", "run.lock"])
        a = self.attrs_of_partial()
        self.assertEqual(a["status"], "failed")
        self.assertEqual(a["failure"], "ZeroDivisionError: division by zero")
        self.assertNotIn("digest", a)
        with h5py.File(self.partial, "r") as f:
            self.assertEqual(list(f["metrics/loss"][:]), [0.5], "rows before the failure are kept")
        need_binaries(self, "sweep")  # and sweep compares it as the partial record it is
        p = sweep("compare", self.run, self.run)
        self.assertIn("partial: no completed record: the run is failed (ZeroDivisionError", p.stdout,
                      p.stdout + p.stderr)
        self.assertIn("over the rows the partial records hold: ", p.stdout, p.stdout + p.stderr)

    def test_leaving_without_finish_or_abandon(self):
        with sr.RecordWriter(self.run, config_yaml="a: 1\n") as w:
            w.append_step(step=1, loss=0.5)
        self.assertFalse(os.path.exists(self.record))
        a = self.attrs_of_partial()
        self.assertEqual(a["status"], "failed")
        self.assertIn("without finish()", a["failure"])
        w = sr.RecordWriter(self.run, config_yaml="a: 1\n")  # a stale partial is replaced
        w.abandon("out of patience")
        self.assertEqual(self.attrs_of_partial()["failure"], "out of patience")
        with self.assertRaises(sr.RecordError):
            w.finish()
        self.assertFalse(os.path.exists(self.record))

    def test_existing_record_is_never_touched(self):
        write_record(self.run)
        before = read_file(self.record, "rb"), os.stat(self.record).st_mtime_ns
        for target in (self.run, self.record):
            with self.assertRaises(sr.RecordError) as e:
                write_record(target)
            self.assertIn("a completed record is already there", str(e.exception))
        self.assertEqual((read_file(self.record, "rb"), os.stat(self.record).st_mtime_ns), before)
        self.assertFalse(os.path.exists(self.partial))

    def test_one_writer_per_run_directory(self):
        with sr.RecordWriter(self.run, config_yaml="a: 1\n") as w:
            with self.assertRaises(sr.RecordError) as e:
                sr.RecordWriter(self.run, config_yaml="a: 1\n")
            self.assertIn("another process is writing this run", str(e.exception))
            w.finish()
        self.assertTrue(os.path.exists(self.record))

    def test_bad_input_is_refused_before_any_file(self):
        with self.assertRaises(TypeError):
            sr.flat_checksum(np.zeros(3, dtype=np.float64))
        with self.assertRaises(ValueError):
            sr.RecordWriter(self.run, run_id="not-an-id")
        self.assertFalse(os.path.exists(self.run))
        with sr.RecordWriter(self.run, config_yaml="a: 1\n", params=MLP_SHAPES) as w:
            with self.assertRaises(ValueError):
                w.append_step(step=1, los=1.0)  # a typo is not a silent zero
            with self.assertRaises(sr.RecordError):
                w.append_checksum(0, 1, [1, 2])  # one hash per tensor
            w.finish()


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR, BIN_GIVEN = sys.argv.pop(1), True
    unittest.main()
