#!/usr/bin/python3
"""`sweep export --format csv` read back by pandas (Debian's python3-pandas, no project
code): every per-step metric and every held-out loss of every run, as recorded (h5py reads
the records for the comparison); -o refuses to replace a file that is not an export.
`sweep export --format tensorboard` read back by the reader below, written here from the
published TFRecord framing (CRC-32C) and the Event, Summary and HParams protobuf
definitions over the protobuf wire format, sharing no code with sweep.

Usage: test_export.py [BIN_DIR] [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import struct

import h5py
import numpy as np
import pandas as pd
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("SWEEP_BIN_DIR") or os.path.join(ROOT, "build", "bin")


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


# ------------------------------------------------------ an independent TensorBoard reader

def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def _masked(data):
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecords(path):
    """The data of every TFRecord frame of `path`, both CRCs checked."""
    out = []
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        header = blob[at:at + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", blob[at + 8:at + 12])
        assert hcrc == _masked(header), "length CRC"
        data = blob[at + 12:at + 12 + n]
        (dcrc,) = struct.unpack("<I", blob[at + 12 + n:at + 16 + n])
        assert dcrc == _masked(data), "data CRC"
        out.append(data)
        at += 16 + n
    return out


def fields(msg):
    """Protobuf wire format: {field number: [values]} (varints as int, fixed64/32 as bytes)."""
    out, at = {}, 0

    def varint():
        nonlocal at
        v, shift = 0, 0
        while True:
            b = msg[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while at < len(msg):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
        elif wire == 1:
            v, at = msg[at:at + 8], at + 8
        elif wire == 5:
            v, at = msg[at:at + 4], at + 4
        elif wire == 2:
            n = varint()
            v, at = msg[at:at + n], at + n
        else:
            raise ValueError("wire type %d" % wire)
        out.setdefault(field, []).append(v)
    return out


def f64(b):
    return struct.unpack("<d", b)[0]


def f32(b):
    return struct.unpack("<f", b)[0]


def events(path):
    """Each Event as (wall_time, step, file_version, [summary values as field dicts])."""
    out = []
    for data in tfrecords(path):
        e = fields(data)
        values = [fields(v) for v in fields(e[5][0]).get(1, [])] if 5 in e else []
        out.append((f64(e[1][0]) if 1 in e else 0.0, e.get(2, [0])[0],
                    e[3][0].decode() if 3 in e else None, values))
    return out


def hparams_data(value):
    """The HParamsPluginData fields of a Summary.Value (metadata = 9)."""
    plugin = fields(fields(value[9][0])[1][0])
    assert plugin[1][0] == b"hparams"
    return fields(plugin[2][0])


class TensorBoardTests:
    """`sweep export --format tensorboard`, on Export's sweep."""

    def test_an_independent_reader_gets_every_scalar_and_the_hparams(self):
        tb = os.path.join(self.tmp, "tb")
        p = self.sweep("export", self.out, "--format", "tensorboard", "-o", tb)
        self.assertEqual(p.returncode, 0, show(p))
        # The experiment: the two varying keys, numbers with their interval, and two metrics.
        top = events(os.path.join(tb, "events.out.tfevents.0.sweep"))
        self.assertEqual(top[0][2], "brain.Event:2")
        self.assertEqual(top[1][3][0][1][0], b"_hparams_/experiment")
        exp = fields(hparams_data(top[1][3][0])[2][0])
        infos = [fields(i) for i in exp[4]]
        self.assertEqual([i[1][0] for i in infos], [b"train.lr", b"train.seed"])
        self.assertEqual([i[4][0] for i in infos], [3, 3])  # DATA_TYPE_FLOAT64
        interval = fields(infos[0][6][0])
        self.assertEqual((f64(interval[1][0]), f64(interval[2][0])), (1.0e-3, 3.0e-3))
        self.assertEqual([fields(fields(m)[1][0])[2][0] for m in exp[5]], [b"train/loss", b"eval/loss"])
        runs = sorted(os.listdir(os.path.join(self.out, "runs")))
        self.assertEqual(sorted(d for d in os.listdir(tb) if os.path.isdir(os.path.join(tb, d))), runs)
        groups = set()
        for rid in runs:
            ev = events(os.path.join(tb, rid, "events.out.tfevents.0.sweep"))
            self.assertEqual(ev[0][2], "brain.Event:2")
            start = fields(hparams_data(ev[1][3][0])[3][0])
            hp = {fields(e)[1][0].decode(): f64(fields(fields(e)[2][0])[2][0]) for e in start[1]}
            groups.add(start[4][0])
            end = fields(hparams_data(ev[-1][3][0])[4][0])
            self.assertEqual(end[1][0], 1)  # STATUS_SUCCESS
            scalars = {}
            for wall, step, _, values in ev[2:-1]:
                for v in values:
                    scalars.setdefault(v[1][0].decode(), []).append((step, f32(v[2][0]), wall))
            with h5py.File(os.path.join(self.out, "runs", rid, "record.h5"), "r") as f:
                keys = [k.decode() for k in f["config/keys"][:]]
                vals = [v.decode() for v in f["config/values"][:]]
                self.assertEqual(hp, {"train.lr": float(vals[keys.index("train.lr")]),
                                      "train.seed": float(vals[keys.index("train.seed")])})
                for metric in ("loss", "lr", "grad_norm", "clip_coef", "loss_scale", "step_time_s", "tokens_per_s"):
                    got = scalars["train/" + metric]
                    self.assertEqual([s for s, _, _ in got], list(f["metrics/step"][:]), metric)
                    # TensorBoard's scalars are float32: the recorded doubles, rounded once.
                    np.testing.assert_array_equal(np.array([x for _, x, _ in got], dtype=np.float32),
                                                  f["metrics/" + metric][:].astype(np.float32), err_msg=metric)
                ev_loss = scalars["eval/loss"]
                self.assertEqual([s for s, _, _ in ev_loss], [3, 6])
                np.testing.assert_array_equal(np.array([x for _, x, _ in ev_loss], dtype=np.float32),
                                              f["eval/loss"][:].astype(np.float32))
            walls = [w for w, _, _, _ in ev]
            self.assertEqual(walls, sorted(walls), "wall times go forward")
        self.assertEqual(len(groups), 2, "the seeds of one lr are one session group")
        # The same records give the same bytes; an earlier export is replaced whole: a run
        # that an earlier export held and the sweep no longer does (planted here) is gone.
        with open(os.path.join(tb, runs[0], "events.out.tfevents.0.sweep"), "rb") as f:
            first = f.read()
        gone = os.path.join(tb, "ffffffffffffffff")
        os.makedirs(gone)
        shutil.copy(os.path.join(tb, runs[0], "events.out.tfevents.0.sweep"), gone)
        p = self.sweep("export", self.out, "--format", "tensorboard", "-o", tb)
        self.assertEqual(p.returncode, 0, show(p))
        with open(os.path.join(tb, runs[0], "events.out.tfevents.0.sweep"), "rb") as f:
            self.assertEqual(f.read(), first)
        self.assertFalse(os.path.exists(gone), "a run no longer in the sweep stayed in the export")
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".tb.")], [], "a temporary stayed")

    def test_a_foreign_directory_or_stdout_is_refused(self):
        foreign = os.path.join(self.tmp, "mine")
        os.makedirs(foreign, exist_ok=True)
        with open(os.path.join(foreign, "notes.txt"), "w") as f:
            f.write("mine\n")
        p = self.sweep("export", self.out, "--format", "tensorboard", "-o", foreign)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("holds other files and no earlier TensorBoard export", p.stderr)
        self.assertEqual(os.listdir(foreign), ["notes.txt"])
        p = self.sweep("export", self.out, "--format", "tensorboard", "-o", "-")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("a TensorBoard export is a directory", p.stderr)
        link = os.path.join(self.tmp, "link")
        if not os.path.lexists(link):
            os.symlink(foreign, link)
        p = self.sweep("export", self.out, "--format", "tensorboard", "-o", link)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("is a symbolic link", p.stderr)
        self.assertEqual(os.listdir(foreign), ["notes.txt"])



class Export(unittest.TestCase, TensorBoardTests):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="export_test.")
        g = {"name": "export",
             "base": {"model": {"layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16},
                      "data": {"eval_fraction": 0.01},
                      "train": {"steps": 6, "micro_batch": 2, "eval_every": 3, "eval_batches": 1}},
             "grid": {"train.lr": [1.0e-3, 3.0e-3], "train.seed": [0, 1]}}
        cls.grid = os.path.join(cls.tmp, "grid.yaml")
        with open(cls.grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(g, f, sort_keys=False)
        cls.out = os.path.join(cls.tmp, "out")
        p = cls.sweep("run", cls.grid, "--out", cls.out, "--quiet")
        assert p.returncode == 0, show(p)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def sweep(cls, *args):
        return subprocess.run([os.path.join(BIN_DIR, "sweep")] + list(args), capture_output=True, text=True,
                              timeout=300)

    def test_pandas_reads_every_recorded_value(self):
        p = self.sweep("export", self.out)
        self.assertEqual(p.returncode, 0, show(p))
        # round_trip: pandas' default float parser may miss the last bit of a 17-digit number.
        d = pd.read_csv(os.path.join(self.out, "export.csv"), dtype={"run_id": str}, float_precision="round_trip")
        self.assertEqual(list(d.columns), ["run_id", "status", "train.lr", "train.seed", "step", "metric", "value"])
        runs = sorted(os.listdir(os.path.join(self.out, "runs")))
        self.assertEqual(sorted(d["run_id"].unique()), runs)
        for rid in runs:
            mine = d[d["run_id"] == rid]
            with h5py.File(os.path.join(self.out, "runs", rid, "record.h5"), "r") as f:
                for metric in ("loss", "lr", "grad_norm", "clip_coef", "loss_scale", "step_time_s", "tokens_per_s",
                               "skipped", "tokens"):
                    col = mine[mine["metric"] == metric].sort_values("step")
                    self.assertEqual(list(col["step"]), list(f["metrics/step"][:]), metric)
                    # 17 significant digits: the very doubles the record holds.
                    np.testing.assert_array_equal(col["value"].to_numpy(), f["metrics/" + metric][:].astype(float),
                                                  err_msg=f"{rid} {metric}")
                ev = mine[mine["metric"] == "eval_loss"].sort_values("step")
                self.assertEqual(list(ev["step"]), [3, 6])
                np.testing.assert_array_equal(ev["value"].to_numpy(), f["eval/loss"][:])
                lr = f["config/values"][list(f["config/keys"][:]).index(b"train.lr")].decode()
            self.assertEqual(set(mine["train.lr"]), {float(lr)})
            self.assertEqual(set(mine["status"]), {"completed"})
        # Long format pivots into one column per metric.
        wide = d.pivot_table(index=["run_id", "step"], columns="metric", values="value")
        self.assertEqual(len(wide), 4 * 6)

    def test_stdout_and_refusing_a_foreign_file(self):
        p = self.sweep("export", self.out, "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertTrue(p.stdout.startswith("run_id,status,"), p.stdout[:100])
        foreign = os.path.join(self.tmp, "notes.csv")
        with open(foreign, "w") as f:
            f.write("mine\n")
        p = self.sweep("export", self.out, "-o", foreign)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("exists and is not a sweep export (CSV); refusing to replace it", p.stderr)
        with open(foreign) as f:
            self.assertEqual(f.read(), "mine\n")
        p = self.sweep("export", self.out, "--format", "parquet")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("--format 'parquet': expected csv", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
