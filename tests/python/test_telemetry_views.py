#!/usr/bin/python3
"""Gradient telemetry where people look (issue 57), on a real two-rank MoE run of sweep-train
(2 layers of 4 experts, 24 steps, a /telemetry row every 4), each reader checked against the
record as h5py reads it:

a. `sweep report`: headless Chromium lays the page out and a probe counts, through the DOM,
   the heat map's cells (2 ranks x 24 steps), the tensor curves (8), and a curve per MoE
   layer in the expert-load and entropy charts; the Markdown report has the tables.
b. `sweep export --format telemetry` read back by pandas: every rank norm, tensor norm and
   routed-token count as recorded, and the load and entropy as numpy computes them.
c. `sweep export --format tensorboard` read back by test_export.py's independent reader: the
   telemetry scalars (float32 of the recorded doubles) and the routed-token histograms.
d. `sweep show --telemetry [--step S]`: the table at the last row and at a step without a
   row, number for number; bad steps exit 2 and say why.
e. A record without telemetry (python/sweep_record, none written): no telemetry section,
   a header-only telemetry export, and `show --telemetry` exits 2.

Usage: test_telemetry_views.py [BIN_DIR] [unittest options]. The Chromium checks are skipped
without chromium.
"""

import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np
import pandas as pd
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402
import test_export as tb  # noqa: E402  (the independent TensorBoard reader)
import test_report_views as views  # noqa: E402  (chromium probe, synthetic records)

LAYERS, EXPERTS, STEPS, EVERY = 2, 4, 24, 4
GRID = {"name": "telemetry",
        "base": {"model": {"layers": LAYERS, "d_model": 32, "heads": 2, "vocab": 64, "seq_len": 16,
                           "moe": {"experts": EXPERTS, "top_k": 2}},
                 "data": {"kind": "synthetic", "seed": 0, "branching": 4},
                 "train": {"steps": STEPS, "micro_batch": 2, "accum": 3, "lr": 3.0e-3, "threads": 1,
                           "telemetry_every": EVERY},
                 "dist": {"world_size": 2}}}

# Counts, through the DOM, what each telemetry part of the report draws.
PROBE = r"""<script>
(function () {
  var out = {runs: [], heatmaps: []};
  document.querySelectorAll("details.telemetry").forEach(function (d) {
    var parts = {};
    d.querySelectorAll("section.telemetry-part").forEach(function (s) {
      parts[s.getAttribute("data-part")] = {curves: s.querySelectorAll("svg g.s").length,
                                            cells: s.querySelectorAll("svg.heatmap rect.cell").length,
                                            labels: Array.prototype.map.call(s.querySelectorAll("svg text.end"),
                                                                             function (t) { return t.firstChild.nodeValue; })};
    });
    out.runs.push({run: d.getAttribute("data-run"), parts: parts});
  });
  document.querySelectorAll("svg.heatmap").forEach(function (svg) {
    var box = svg.getBoundingClientRect(), tips = [];
    svg.querySelectorAll("rect.cell title").forEach(function (t) { tips.push(t.textContent); });
    out.heatmaps.push({rows: +svg.getAttribute("data-rows"), columns: +svg.getAttribute("data-columns"),
                       width: box.width, height: box.height, right: box.right, window: window.innerWidth,
                       tips: tips});
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def read_record(path):
    with h5py.File(path, "r") as f:
        t = f["telemetry"]
        return {"steps": f["metrics/step"][:].tolist(),
                "rank": f["ranks/grad_norm"][:],
                "row_steps": t["step"][:].tolist(),
                "why": [w.decode() for w in t["why"][:]],
                "tensor": t["tensor_grad_norm"][:],
                "routed": t["routed_tokens"][:].reshape(len(t["step"]), LAYERS, EXPERTS),
                "moe_shape": t["moe_shape"][:].tolist(),
                "params": [n.decode() for n in f["params/name"][:]]}


def load_and_entropy(tokens):
    """numpy's own: the busiest expert over the mean, the entropy over ln(E)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    share = tokens / tokens.sum()
    nz = share[share > 0]
    return tokens.max() / tokens.mean(), float(-(nz * np.log(nz)).sum() / math.log(len(tokens)))


def top_tensors(rec, k=8):
    """The k tensors with the largest norm at some row, ties in /params order."""
    top = rec["tensor"].max(axis=0)
    return sorted(range(len(top)), key=lambda p: (-top[p], p))[:k]


def g4(x):
    return "%.4g" % x


class TelemetryViews(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="telemetry_views.")
        cls.out = os.path.join(cls.tmp, "s")
        grid = os.path.join(cls.tmp, "g.yaml")
        with open(grid, "w", encoding="utf-8") as f:
            yaml.safe_dump(GRID, f)
        p = sweep("run", grid, "--out", cls.out)
        assert p.returncode == 0, show(p)
        (cls.rid,) = os.listdir(os.path.join(cls.out, "runs"))
        cls.run_dir = os.path.join(cls.out, "runs", cls.rid)
        cls.rec = read_record(os.path.join(cls.run_dir, "record.h5"))
        assert cls.rec["moe_shape"] == [LAYERS, EXPERTS], cls.rec["moe_shape"]
        assert cls.rec["row_steps"] == list(range(EVERY, STEPS + 1, EVERY)), cls.rec["row_steps"]
        assert cls.rec["rank"].shape == (STEPS, 2)

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP_TMP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ a. the report

    @unittest.skipIf(not views.BROWSER, "chromium is not installed")
    def test_a_the_report_draws_the_heatmap_the_tensor_curves_and_the_expert_load(self):
        html = os.path.join(self.tmp, "report.html")
        p = sweep("report", self.out, "-o", html)
        self.assertEqual(p.returncode, 0, show(p))
        work = tempfile.mkdtemp(dir=self.tmp)
        got = views.probe(html, work, PROBE)
        self.assertEqual([r["run"] for r in got["runs"]], [self.rid])
        parts = got["runs"][0]["parts"]
        self.assertEqual(sorted(parts), ["expert-load", "rank-heatmap", "routing-entropy", "tensor-norms"])
        self.assertEqual(parts["rank-heatmap"]["cells"], 2 * STEPS)
        (heat,) = got["heatmaps"]
        self.assertEqual((heat["rows"], heat["columns"]), (2, STEPS))
        self.assertGreater(heat["width"], 200)
        self.assertLessEqual(heat["right"], heat["window"])
        # Each cell's tooltip is its rank's recorded norm at its step.
        for k in range(2):
            for i, step in enumerate(self.rec["steps"]):
                self.assertIn("rank %d, step %d: " % (k, step), heat["tips"][k * STEPS + i])
        self.assertEqual(parts["tensor-norms"]["curves"], 8)
        self.assertEqual(parts["tensor-norms"]["labels"], [self.rec["params"][p] for p in top_tensors(self.rec)])
        for name in ("expert-load", "routing-entropy"):
            self.assertEqual(parts[name]["curves"], LAYERS, name)
            self.assertEqual(parts[name]["labels"], ["layer 0", "layer 1"], name)

    def test_a2_the_markdown_report_has_the_tables(self):
        p = sweep("report", self.out, "--format", "md", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        section = p.stdout[p.stdout.index("## Gradient telemetry"):]
        section = section[:section.index("\n## ", 5)]
        self.assertIn("### " + self.rid, section)
        rank_rows = re.findall(r"^\| (\d) \| ([\d.e+-]+) \|", section, re.M)
        self.assertEqual([r for r, _ in rank_rows], ["0", "1"])
        for k, median in rank_rows:
            col = np.sort(self.rec["rank"][:, int(k)])
            self.assertEqual(median.strip(), "%.6g" % col[(len(col) - 1) // 2])  # the lower median
        first_tensor = self.rec["params"][top_tensors(self.rec)[0]].replace("_", "\\_")
        self.assertRegex(section, r"\| %s \| %s \|" % (re.escape(first_tensor), "%.6g" % self.rec["tensor"][0][
            top_tensors(self.rec)[0]]))
        load, entropy = load_and_entropy(self.rec["routed"][-1][1])
        self.assertRegex(section, r"\| 1 \| load max/mean \|.* %s \|\n\|  \| entropy \|.* %s \|" %
                         (re.escape("%.6g" % load), re.escape("%.6g" % entropy)))

    # ------------------------------------------------------------------ b. the CSV

    def test_b_the_telemetry_csv_holds_every_figure_as_recorded(self):
        p = sweep("export", self.out, "--format", "telemetry", "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        df = pd.read_csv(io.StringIO(p.stdout), keep_default_na=False, na_values=[], dtype={"run_id": str},
                         float_precision="round_trip")
        self.assertEqual(list(df.columns), ["run_id", "status", "step", "why", "kind", "name", "rank", "layer",
                                            "expert", "value"])
        self.assertEqual(set(df["run_id"]), {self.rid})
        rank = df[df.kind == "rank_grad_norm"]
        self.assertEqual(len(rank), 2 * STEPS)
        got = rank.pivot(index="step", columns="rank", values="value")
        np.testing.assert_array_equal(got.index.to_numpy(), self.rec["steps"])
        np.testing.assert_array_equal(got.to_numpy(dtype=np.float64), self.rec["rank"])  # 17 digits: exact
        tensor = df[df.kind == "tensor_grad_norm"]
        self.assertEqual(len(tensor), len(self.rec["row_steps"]) * len(self.rec["params"]))
        for i, step in enumerate(self.rec["row_steps"]):
            rows = tensor[tensor.step == step]
            self.assertEqual(list(rows["name"]), self.rec["params"])
            self.assertEqual(set(rows["why"]), {self.rec["why"][i]})
            np.testing.assert_array_equal(rows["value"].to_numpy(dtype=np.float64), self.rec["tensor"][i])
            routed = df[(df.kind == "routed_tokens") & (df.step == step)]
            got = np.zeros((LAYERS, EXPERTS))
            for _, r in routed.iterrows():
                got[int(r["layer"]), int(r["expert"])] = r["value"]
            np.testing.assert_array_equal(got, self.rec["routed"][i])
            for layer in range(LAYERS):
                load, entropy = load_and_entropy(self.rec["routed"][i][layer])
                (l_row,) = df[(df.kind == "expert_load") & (df.step == step) & (df.layer == str(layer))].itertuples()
                self.assertAlmostEqual(float(l_row.value), load, places=12)
                self.assertEqual(int(l_row.expert), int(np.argmax(self.rec["routed"][i][layer])))
                (e_row,) = df[(df.kind == "routing_entropy") & (df.step == step) &
                              (df.layer == str(layer))].itertuples()
                self.assertAlmostEqual(float(e_row.value), entropy, places=12)
        self.assertEqual(set(df.kind), {"rank_grad_norm", "tensor_grad_norm", "routed_tokens", "expert_load",
                                        "routing_entropy"})
        # Written to <dir>/telemetry.csv by default, and a file that is not an export is kept.
        p = sweep("export", self.out, "--format", "telemetry")
        self.assertEqual(p.returncode, 0, show(p))
        with open(os.path.join(self.out, "telemetry.csv"), encoding="utf-8") as f:  # (both read as text: \r\n as \n)
            self.assertEqual(f.read(), p_text(self.out))
        mine = os.path.join(self.tmp, "mine.csv")
        with open(mine, "w") as f:
            f.write("a,b\n1,2\n")
        p = sweep("export", self.out, "--format", "telemetry", "-o", mine)
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("exists and is not a telemetry export (CSV)", p.stderr)

    # ------------------------------------------------------------------ c. TensorBoard

    def test_c_tensorboard_holds_the_telemetry_scalars_and_histograms(self):
        out = os.path.join(self.tmp, "tb")
        p = sweep("export", self.out, "--format", "tensorboard", "-o", out)
        self.assertEqual(p.returncode, 0, show(p))
        scalars, histos = {}, {}
        for _, step, _, values in tb.events(os.path.join(out, self.rid, "events.out.tfevents.0.sweep")):
            for v in values:
                name = v[1][0].decode()
                if 2 in v:
                    scalars.setdefault(name, []).append((step, tb.f32(v[2][0])))
                elif 5 in v:
                    histos.setdefault(name, []).append((step, tb.fields(v[5][0])))
        for k in range(2):
            got = scalars["telemetry/rank_grad_norm/rank_%d" % k]
            self.assertEqual([s for s, _ in got], self.rec["steps"])
            np.testing.assert_array_equal(np.array([x for _, x in got], dtype=np.float32),
                                          self.rec["rank"][:, k].astype(np.float32))
        for p_i, name in enumerate(self.rec["params"]):
            got = scalars["telemetry/tensor_grad_norm/" + name]
            self.assertEqual([s for s, _ in got], self.rec["row_steps"], name)
            np.testing.assert_array_equal(np.array([x for _, x in got], dtype=np.float32),
                                          self.rec["tensor"][:, p_i].astype(np.float32), name)
        for layer in range(LAYERS):
            loads = [load_and_entropy(self.rec["routed"][i][layer]) for i in range(len(self.rec["row_steps"]))]
            for tag, k in (("expert_load", 0), ("routing_entropy", 1)):
                got = scalars["telemetry/%s/layer_%d" % (tag, layer)]
                self.assertEqual([s for s, _ in got], self.rec["row_steps"])
                np.testing.assert_allclose([x for _, x in got], [x[k] for x in loads], rtol=1e-6)
            got = histos["telemetry/routed_tokens/layer_%d" % layer]
            self.assertEqual([s for s, _ in got], self.rec["row_steps"])
            for i, (_, h) in enumerate(got):
                limits = np.frombuffer(h[6][0], dtype="<f8")
                counts = np.frombuffer(h[7][0], dtype="<f8")
                np.testing.assert_array_equal(limits, np.arange(EXPERTS) + 0.5)
                np.testing.assert_array_equal(counts, self.rec["routed"][i][layer])
                self.assertEqual(tb.f64(h[3][0]), float(self.rec["routed"][i][layer].sum()))  # num

    # ------------------------------------------------------------------ d. show

    def show_table(self, *args):
        p = sweep("show", self.run_dir, "--telemetry", *args)
        self.assertEqual(p.returncode, 0, show(p))
        return p.stdout.splitlines()

    def test_d_show_telemetry_prints_the_last_rows_table(self):
        lines = self.show_table()
        i = len(self.rec["row_steps"]) - 1
        self.assertEqual(lines[1], "gradient telemetry at step %d (its /telemetry row: %s); rows at steps %s" %
                         (STEPS, self.rec["why"][i], ", ".join(map(str, self.rec["row_steps"]))))
        ranks = [l.split() for l in lines if re.match(r"^\d +\S+ +\S+$", l)]
        norms = self.rec["rank"][-1]
        typical = min(norms)  # the lower median of two
        self.assertEqual(ranks, [[str(k), g4(norms[k]), g4(norms[k] / typical)] for k in range(2)])
        start = next(n for n, l in enumerate(lines) if l.startswith("tensor (8 largest of %d)" %
                                                                     len(self.rec["params"])))
        row = self.rec["tensor"][i]
        order = sorted(range(len(row)), key=lambda p: (-row[p], p))[:8]
        self.assertEqual([l.split() for l in lines[start + 1:start + 9]],
                         [[self.rec["params"][p], g4(row[p])] for p in order])
        start = next(n for n, l in enumerate(lines) if l.startswith("MoE layer"))
        for layer in range(LAYERS):
            tokens = self.rec["routed"][i][layer]
            load, entropy = load_and_entropy(tokens)
            self.assertEqual(lines[start + 1 + layer].split(),
                             [str(layer), g4(tokens.sum()), g4(load), str(int(np.argmax(tokens))), g4(entropy)] +
                             [str(int(x)) for x in tokens])

    def test_d2_a_step_between_rows_has_the_rank_norms_only(self):
        lines = self.show_table("--step", "5")
        self.assertTrue(lines[1].startswith("gradient telemetry at step 5: rank norms only, no /telemetry row"),
                        lines)
        self.assertEqual([l.split()[:2] for l in lines[4:6]], [["0", g4(self.rec["rank"][4][0])],
                                                               ["1", g4(self.rec["rank"][4][1])]])
        self.assertFalse(any(l.startswith(("tensor", "MoE")) for l in lines), lines)
        lines = self.show_table("--step", "8")
        self.assertIn("(its /telemetry row: every)", lines[1])
        self.assertTrue(any(l.startswith("MoE layer") for l in lines), lines)

    def test_d3_bad_steps_exit_2_and_say_why(self):
        for args, said in ((["--telemetry", "--step", "99"],
                            "--step 99: the record has no step 99 (its steps are 1 to 24); its /telemetry rows are "
                            "at steps 4, 8, 12, 16, 20, 24"),
                           (["--telemetry", "--step", "0"], "--step: got '0': expected a whole number from 1"),
                           (["--telemetry", "--step", "x"], "--step: got 'x'"),
                           (["--step", "3"], "--step requires --telemetry")):
            p = sweep("show", self.run_dir, *args)
            self.assertEqual(p.returncode, 2, show(p))
            self.assertIn(said, p.stderr, args)
            self.assertEqual(p.stdout, "", args)

    # ------------------------------------------------------------------ e. no telemetry

    def test_e_a_record_without_telemetry_changes_nothing(self):
        bare = os.path.join(self.tmp, "bare")
        rid = views.write_run(bare, {"train.lr": "0.001", "train.seed": "0"}, views.curve(30, 2.0), world_size=2)
        p = sweep("report", bare, "-o", "-")
        self.assertEqual(p.returncode, 0, show(p))
        self.assertNotIn("Gradient telemetry", p.stdout)
        self.assertNotIn("heatmap", p.stdout)
        self.assertNotIn("telemetry-part", p.stdout)
        p = sweep("report", bare, "--format", "md", "-o", "-")
        self.assertNotIn("Gradient telemetry", p.stdout)
        p = sweep("export", bare, "--format", "telemetry", "-o", "-")
        self.assertEqual((p.returncode, p.stdout), (0, "run_id,status,step,why,kind,name,rank,layer,expert,value\n"),
                         show(p))
        p = sweep("show", os.path.join(bare, "runs", rid), "--telemetry")
        self.assertEqual(p.returncode, 2, show(p))
        self.assertIn("--telemetry: the record has no gradient telemetry", p.stderr)


def p_text(out):
    p = sweep("export", out, "--format", "telemetry", "-o", "-")
    assert p.returncode == 0, show(p)
    return p.stdout


if __name__ == "__main__":
    cli_util.take_bin_dir()
    views.BIN_DIR = tb.BIN_DIR = cli_util.BIN_DIR
    if not views.BROWSER:
        print("note: chromium is not installed; the report's DOM checks are skipped")
    unittest.main()
