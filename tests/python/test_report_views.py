#!/usr/bin/python3
"""Reports that read at any size (issue 38): five sweeps rendered by `sweep report` and laid
out by headless Chromium in a 1400 px window, each measured through the DOM by a probe
script on a copy of the page, and saved as a PNG for a person to look at.

  seven_tricks  sweeps/seven-tricks.yaml's 17 runs (15 groups: a base and one change per knob)
  grid60        a 60-run grid: lr x warmup x clip norm x 2 seeds (30 groups)
  tpe40         a 40-trial tpe search where train.lr alone decides the objective
  halving       successive halving over 27 points (27x16, 9x50, 3x150 steps)
  pbt           a real population-based search of the tiny model: each member's schedule
  program       tests/programs/linreg through a grid's program: section, with held-out
                rows and metrics of its own (weight_error, eval within_0.1)

The first four are records written with python/sweep_record (no training: seconds), with a
search.log in the format harness/search writes; the last is a real `sweep run`. Every view
must have: no legend text cut (the HTML legends wrap; each end label and axis name lies in
its SVG and ends without an ellipsis), the objective column visible without scrolling,
every plot inside its box and the window, nothing widening the page, and a curve for each
held-out and custom metric. Each view also checks what it is for (small multiples, slices,
the importance ranking, the rung picture, classes and the throughput plot only where they
mean something).

Usage: test_report_views.py BIN_DIR [unittest options]   (BIN_DIR holds sweep and linreg)
PNGs go to $SWEEP_REPORT_SHOTS (default /tmp/report-shots): NAME.png, the whole page, and
with SWEEP_REPORT_TILES=1 also NAME-1.png, NAME-2.png, ...: 1400 x 1800 tiles of it, which
an image viewer shows without shrinking the page to a strip. Exit 77 (skipped) without
chromium.
"""

import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import sweep_record as sr  # noqa: E402

import cli_util  # noqa: E402  (probe_result)

BIN_DIR = os.path.join(ROOT, "build", "bin")
SHOTS = os.environ.get("SWEEP_REPORT_SHOTS", "/tmp/report-shots")
WIDTH = 1400
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def run(argv, timeout=300, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def show(p):
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])


# ---------------------------------------------------------------- synthetic records

def config_text(pairs):
    """The canonical config text of dotted pairs: sections at column 0, keys at column 2."""
    sections = {}
    for k, v in pairs.items():
        section, key = k.split(".", 1)
        sections.setdefault(section, []).append((key, v))
    return "".join(section + ":\n" + "".join("  %s: %s\n" % kv for kv in keys) for section, keys in sections.items())


def num(v):
    """A number as a config value: six significant digits, no trailing zeros."""
    return "%.6g" % v if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)


def write_run(sweep_dir, pairs, losses, status="completed", tokens_per_s=9000.0, math_key=None, world_size=1,
              evals=(), lr=1e-3):
    """One record under sweep_dir/runs/<id>/: a step per loss; checksums that depend on
    `math_key` only (runs with the same one are bit-identical, as layouts must be)."""
    text = config_text(pairs)
    rid = sr.run_id_of(text)
    run_dir = os.path.join(sweep_dir, "runs", rid)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "config.yaml"), "w") as f:
        f.write(text)
    key = sr.run_id_of(math_key if math_key is not None else text)
    rng = random.Random(rid)

    def checksum(step):
        h = int(sr.run_id_of("%s/%d" % (key, step)), 16)
        return h, [h ^ 0x5EED]

    with sr.RecordWriter(run_dir, run_id=rid, config_yaml=text, config=list(pairs.items()),
                         params=[("w", (4,))], world_size=world_size, sweep_id="views") as w:
        w.append_checksum(0, *checksum(0))
        for step, loss in enumerate(losses, 1):
            tps = tokens_per_s * (1 + 0.03 * (rng.random() - 0.5))
            w.append_step(step=step, loss=loss, lr=lr, grad_norm=1.0 + 2.0 / step, tokens=256, step_time_s=256 / tps,
                          tokens_per_s=tps)
            w.append_rank_times([256 / tps] * world_size)
        w.append_checksum(len(losses), *checksum(len(losses)))
        for e in evals:
            w.append_eval(*e)
        w.finish(status)
    return rid


def curve(steps, floor, amp=2.5, rate=0.06, noise=0.004, seed=0, warmup=0):
    rng = random.Random(seed)
    out = []
    for s in range(1, steps + 1):
        ramp = min(1.0, s / warmup) if warmup else 1.0
        out.append(floor + amp * math.exp(-rate * s * ramp) + noise * (rng.random() - 0.5))
    return out


def train_loss_end(losses):
    tail = losses[-20:]
    return sum(tail) / len(tail)


def flatten(prefix, d, out):
    for k, v in d.items():
        if isinstance(v, dict):
            flatten(prefix + k + ".", v, out)
        else:
            out[prefix + k] = num(v)


def seven_tricks(sweep_dir):
    """sweeps/seven-tricks.yaml's runs: the base and each include entry over it."""
    with open(os.path.join(ROOT, "sweeps", "seven-tricks.yaml")) as f:
        grid = yaml.safe_load(f)
    base = {"dist.world_size": "1", "dist.zero_stage": "0", "train.deterministic": "true"}
    flatten("", grid["base"], base)
    layout = ("dist.world_size", "train.accum", "dist.zero_stage", "data.workers")
    effect = {"train.precision": {"bf16": 0.012, "fp16": 0.006}, "train.clip_norm": {"0": 0.03, "0.25": 0.02},
              "train.schedule": {"constant": 0.05, "linear": -0.01}, "train.micro_batch": {"8": 0.002, "2": -0.002}}
    speed = {"train.precision": {"bf16": 0.8, "fp16": 0.85}, "dist.world_size": {"2": 1.6},
             "train.deterministic": {"false": 1.25}}
    for entry in [{}] + grid["include"]:
        pairs = dict(base)
        pairs.update({k: num(v) for k, v in entry.items()})
        math_key = config_text({k: v for k, v in pairs.items() if k not in layout})
        floor = 1.55 + sum(effect.get(k, {}).get(v, 0) for k, v in pairs.items())
        tps = 9000.0
        for k, v in pairs.items():
            tps *= speed.get(k, {}).get(v, 1.0)
        seed = int(pairs["train.seed"])
        world = int(pairs["dist.world_size"])
        write_run(sweep_dir, pairs, curve(60, floor, seed=seed, warmup=int(pairs["train.warmup"])), tokens_per_s=tps,
                  math_key=math_key + "seed %d" % seed, world_size=world, lr=float(pairs["train.lr"]))


def grid60(sweep_dir):
    """lr (5) x warmup (3) x clip norm (2) x seeds (2), min_lr derived from lr."""
    base = {"model.layers": "2", "model.d_model": "64", "train.steps": "80", "train.micro_batch": "8"}
    for lr in (1e-3, 2e-3, 3e-3, 5e-3, 1e-2):
        for warmup in (0, 10, 20):
            for clip in (0.5, 1.0):
                for seed in (0, 1):
                    pairs = dict(base)
                    pairs.update({"train.lr": num(lr), "train.min_lr": num(lr / 10), "train.warmup": str(warmup),
                                  "train.clip_norm": num(clip), "train.seed": str(seed)})
                    floor = 1.5 + 0.3 * (math.log10(lr) + 2.3) ** 2 + 0.004 * warmup / 10 + (0.01 if clip < 1 else 0)
                    write_run(sweep_dir, pairs, curve(80, floor, seed=seed * 7 + warmup, noise=0.02, warmup=warmup),
                              lr=lr)


def tpe40(sweep_dir, trials=40, startup=10, seed=3):
    """A tpe search's trials and search.log: train.lr decides the objective (best near 5e-3,
    worse either side); train.warmup and train.clip_norm do nothing. After the random
    startup trials, each draws lr near the best so far, as tpe gathers where it expects the
    best (the other two stay uniform)."""
    rng = random.Random(seed)
    base = {"model.layers": "2", "model.d_model": "64", "train.steps": "60", "train.micro_batch": "8"}
    log = ["# sweep search log: one decision per line; the same grid file and results give the same lines",
           "search tpe seed=%d samples=%d parallel=2 startup=%d metric=objective mode=min "
           "keys=train.lr,train.warmup,train.clip_norm" % (seed, trials, startup)]
    best = (math.inf, None)
    for t in range(trials):
        if t < startup:
            log_lr, source = rng.uniform(-3, math.log10(3e-2)), "random"
        else:
            spread = 0.5 * (1 - t / trials) + 0.08
            log_lr = min(math.log10(3e-2), max(-3, rng.gauss(best[1], spread)))
            source = "tpe (good %d of %d)" % (max(1, t // 4), t)
        lr, warmup, clip = 10 ** log_lr, rng.choice([0, 10, 20, 30, 40]), rng.uniform(0.25, 2.0)
        pairs = dict(base)
        pairs.update({"train.lr": num(lr), "train.min_lr": num(lr / 10), "train.warmup": str(warmup),
                      "train.clip_norm": num(clip), "train.seed": "0"})
        floor = 1.5 + 0.6 * (log_lr - math.log10(5e-3)) ** 2
        losses = curve(60, floor, seed=t, noise=0.01)
        rid = write_run(sweep_dir, pairs, losses, lr=lr)
        objective = train_loss_end(losses)
        if objective < best[0]:
            best = (objective, log_lr)
        inputs = "train.lr=%s train.warmup=%s train.clip_norm=%s" % (num(lr), warmup, num(clip))
        log.append("trial %d batch %d %s: %s -> %s objective=%.17g" % (t, max(0, (t - startup) // 2 + 1) if t >= startup
                                                                         else 0, source, inputs, rid, objective))
    with open(os.path.join(sweep_dir, "search.log"), "w") as f:
        f.write("\n".join(log) + "\n")


def halving(sweep_dir):
    """Successive halving over lr x warmup x clip norm (27 trials, eta 3, 16 of 150 steps
    first): every trial trains to its rung, the best third goes on; the records of trials
    it stopped end at their rung with status stopped. search.log as harness/search writes it."""
    base = {"model.layers": "2", "model.d_model": "64", "train.steps": "150", "train.micro_batch": "8"}
    trials = []
    for lr in (1e-3, 3e-3, 1e-2):
        for warmup in (0, 20, 40):
            for clip in (0.25, 1.0, 4.0):
                pairs = dict(base)
                pairs.update({"train.lr": num(lr), "train.warmup": str(warmup), "train.clip_norm": num(clip)})
                floor = 1.5 + 0.4 * (math.log10(lr) + 2.5) ** 2 + 0.02 * warmup / 20 + (0.03 if clip > 2 else 0)
                trials.append((pairs, curve(150, floor, rate=0.03 * lr / 3e-3 + 0.01, seed=len(trials), warmup=warmup)))
    rungs = [(27, 16), (9, 50), (3, 150)]
    alive = list(range(len(trials)))
    reached = {}
    decisions = []
    for r, (count, steps) in enumerate(rungs):
        ranked = sorted(alive, key=lambda j: (train_loss_end(trials[j][1][:steps]), j))
        keep = rungs[r + 1][0] if r + 1 < len(rungs) else 0
        for k, j in enumerate(ranked):
            last = r + 1 == len(rungs)
            verdict = ("best of bracket" if k == 0 else "finished") if last else "promoted" if k < keep else "stopped"
            decisions.append("bracket 0 rung %d steps %d: rank %d trial %d train_loss_end=%.17g %s" % (
                r, steps, k + 1, j, train_loss_end(trials[j][1][:steps]), verdict))
            reached[j] = steps
        alive = ranked[:keep]
    head = ["# sweep search log: one decision per line; the same grid file and results give the same lines",
            "search halving seed=0 eta=3 min_steps=16 brackets=1 budget=150 metric=train_loss_end mode=min trials=27",
            "bracket 0 s=2: trials 0..26, rungs 27x16 9x50 3x150"]
    for j, (pairs, losses) in enumerate(trials):
        steps = reached[j]
        rid = write_run(sweep_dir, pairs, losses[:steps], status="completed" if steps == 150 else "stopped",
                        lr=float(pairs["train.lr"]))
        inputs = " ".join("%s=%s" % (k, pairs[k]) for k in ("train.lr", "train.warmup", "train.clip_norm"))
        head.append("trial %d: %s -> %s" % (j, inputs, rid))
    with open(os.path.join(sweep_dir, "search.log"), "w") as f:
        f.write("\n".join(head + decisions + ["done"]) + "\n")


# ---------------------------------------------------------------- Chromium

def chromium(profile, *args):
    argv = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--user-data-dir=" + tempfile.mkdtemp(dir=profile), "--hide-scrollbars"]
    return run(argv + list(args), timeout=180)


# Measures, in the window Chromium laid the page out in, everything the views promise. It
# runs on a copy of the report (the report itself has no script) and leaves its JSON in
# <pre id="probe">.
PROBE = r"""<script>
(function () {
  var W = window.innerWidth;
  var out = {window_width: W, page_width: document.documentElement.scrollWidth,
             page_height: document.documentElement.scrollHeight, plots: [], no_ticks: [], outside: [],
             overflowing_plots: [], cut_legends: [], legend_entries: 0, end_labels: 0, cells_overflow: [],
             objective: null, headings: [], curves: {}};
  function inside(r, box) {
    return r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
  }
  document.querySelectorAll("svg:not(.swatch)").forEach(function (svg, i) {
    var name = (svg.getAttribute("aria-label") || ("svg " + i));
    out.plots.push(name);
    var box = svg.getBoundingClientRect(), holder = svg.parentElement.getBoundingClientRect();
    if (box.right > W + 1 || box.left < -1 || box.right > holder.right + 1)
      out.overflowing_plots.push(name + " (" + Math.round(box.left) + ".." + Math.round(box.right) + " px)");
    var x = svg.querySelectorAll("text.tick.x").length, y = svg.querySelectorAll("text.tick.y").length;
    if (x < 2 || y < 2) out.no_ticks.push(name + " (" + x + " x, " + y + " y ticks)");
    svg.querySelectorAll("text").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width === 0) return;
      if (!inside(r, box)) out.outside.push(name.slice(0, 50) + ": " + t.textContent.slice(0, 40));
    });
    svg.querySelectorAll("text.end").forEach(function (t) {
      out.end_labels++;
      var label = t.firstChild ? t.firstChild.textContent : "";
      if (label.indexOf("\u2026") >= 0) out.cut_legends.push("end label " + label);
    });
    var m = /^(.*) against step: /.exec(name);
    if (m) {
      var drawn = svg.querySelectorAll(".curves polyline:not(.leader), .curves circle").length;
      out.curves[m[1]] = (out.curves[m[1]] || 0) + drawn;
    }
  });
  document.querySelectorAll(".legend li").forEach(function (li) {
    out.legend_entries++;
    var r = li.getBoundingClientRect();
    if (li.scrollWidth > li.clientWidth + 1 || r.right > W + 1 || r.left < -1 || li.textContent.indexOf("\u2026") >= 0)
      out.cut_legends.push(li.textContent.slice(0, 60));
  });
  document.querySelectorAll("td, th").forEach(function (c) {
    if (c.scrollWidth > c.clientWidth + 1) out.cells_overflow.push(c.textContent.slice(0, 40));
  });
  var th = document.querySelector("table.results th.obj");
  if (th) {
    var r = th.getBoundingClientRect(), box = th.closest(".wide").getBoundingClientRect();
    out.objective = {text: th.textContent, left: r.left, right: r.right, box_left: box.left, box_right: box.right,
                     table_width: th.closest("table").getBoundingClientRect().width, box_width: box.width};
  }
  document.querySelectorAll("h2, h3, h4").forEach(function (h) { out.headings.push(h.tagName + " " + h.textContent); });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def probe(html_path, work, script=None):
    """The measurements of a probe script (PROBE unless given) on the report at html_path in
    a WIDTH px window: the JSON it leaves in <pre id="probe">."""
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    path = os.path.join(work, "probe.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", (script or PROBE) + "</body>"))
    r = chromium(work, "--window-size=%d,1000" % WIDTH, "--virtual-time-budget=10000", "--dump-dom",
                 "file://" + path)
    return cli_util.probe_result(r)


def screenshots(html_path, name, height, work):
    """The whole page as SHOTS/NAME.png, and (SWEEP_REPORT_TILES) SHOTS/NAME-K.png tiles of 1800 px."""
    os.makedirs(SHOTS, exist_ok=True)
    page = os.path.join(SHOTS, name + ".png")
    r = chromium(work, "--window-size=%d,%d" % (WIDTH, min(height + 40, 30000)), "--screenshot=" + page,
                 "file://" + html_path)
    shots = [page] if r.returncode == 0 and os.path.exists(page) else []
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    for k in range(min(8, (height + 1799) // 1800) if os.environ.get("SWEEP_REPORT_TILES") else 0):
        tile = os.path.join(work, "tile%d.html" % k)
        with open(tile, "w", encoding="utf-8") as f:
            f.write(html.replace("</head>", "<style>body{position:relative;top:-%dpx}</style></head>" % (1800 * k)))
        png = os.path.join(SHOTS, "%s-%d.png" % (name, k + 1))
        chromium(work, "--window-size=%d,1800" % WIDTH, "--screenshot=" + png, "file://" + tile)
        if os.path.exists(png):
            shots.append(png)
    return shots


# ---------------------------------------------------------------- the views

class ReportViews(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="report_views.")
        cls.sweep = os.path.join(BIN_DIR, "sweep")

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP_TMP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def render(self, name, sweep_dir, *args):
        """The report of sweep_dir as HTML, JSON and Markdown, the probe's measurements, the
        PNGs; and the checks every view shares."""
        work = os.path.join(self.tmp, name + "-work")
        os.makedirs(work, exist_ok=True)
        html = os.path.join(work, "report.html")
        p = run([self.sweep, "report", sweep_dir, "-o", html, "--title", name] + list(args))
        self.assertEqual(p.returncode, 0, show(p))
        p = run([self.sweep, "report", sweep_dir, "--format", "json", "-o", "-"] + list(args))
        self.assertEqual(p.returncode, 0, show(p))
        doc = json.loads(p.stdout)
        p = run([self.sweep, "report", sweep_dir, "--format", "md", "-o", "-"] + list(args))
        self.assertEqual(p.returncode, 0, show(p))
        layout = probe(html, work)
        shots = screenshots(html, name, layout["page_height"], work)
        self.assertTrue(shots and os.path.getsize(shots[0]) > 10000, "no screenshot of " + name)
        # What every view promises at 1400 px.
        self.assertEqual(layout["window_width"], WIDTH)
        self.assertLessEqual(layout["page_width"], WIDTH, "something widens the page")
        self.assertEqual(layout["overflowing_plots"], [], "plots larger than their box")
        self.assertEqual(layout["outside"][:5], [], "SVG text outside its SVG")
        self.assertEqual(layout["no_ticks"], [], "plots without tick labels on both axes")
        self.assertEqual(layout["cut_legends"], [], "legend text cut")
        self.assertGreater(layout["legend_entries"], 0)
        self.assertEqual(layout["cells_overflow"][:5], [], "cell text overflowing its cell")
        obj = layout["objective"]
        self.assertIsNotNone(obj, "the results table has an objective column")
        self.assertTrue(obj["left"] >= obj["box_left"] - 1 and obj["right"] <= min(WIDTH, obj["box_right"]) + 1,
                        "the objective column is not visible without scrolling: %s" % obj)
        return doc, layout, open(html, encoding="utf-8").read(), p.stdout

    def test_seven_tricks_many_groups(self):
        d = os.path.join(self.tmp, "seven-tricks")
        seven_tricks(d)
        doc, layout, html, md = self.render("seven-tricks", d)
        self.assertEqual(doc["summary"]["completed"], 17)
        self.assertEqual(len(doc["groups"]), 15)
        # Each curve is named by what it changes from the base, and at its end.
        labels = [g["label"] for g in doc["groups"]]
        self.assertIn("base", labels)
        for want in ("precision=bf16", "precision=fp16", "clip_norm=0", "workers=2", "deterministic=false"):
            self.assertIn(want, labels)
        self.assertTrue(all(len(l) <= 60 for l in labels), labels)
        self.assertEqual(len(set(labels)), len(labels), labels)
        self.assertGreaterEqual(layout["end_labels"], 15)
        # Layout runs share a class: the classes mean something here, and precision,
        # layout and determinism change throughput by design.
        self.assertTrue(doc["classes_matter"])
        self.assertIn("reproducibility class", html)
        self.assertIn("train.precision", doc["throughput_varies_with"])
        self.assertTrue(any(p.startswith("final train loss against tokens/s") for p in layout["plots"]), layout["plots"])
        # 11 varying keys: the objective first, every key's column readable.
        self.assertGreaterEqual(len(doc["columns"]), 8)
        self.assertTrue(layout["objective"]["text"].startswith("final train loss"))
        # One knob at a time: each point against the base over seed 0 (the base also ran
        # seeds 1 and 2), no eta squared.
        self.assertEqual(doc["importance_method"], "delta_against_base")
        deltas = doc["base_deltas"]
        self.assertEqual(len(deltas["base_runs"]), 3)
        self.assertEqual(len(deltas["points"]), 14)
        by_change = {", ".join("%s=%s" % (c["key"], c["value"]) for c in p["changes"]): p for p in deltas["points"]}
        self.assertAlmostEqual(by_change["train.clip_norm=0"]["delta"], 0.03, places=9)
        self.assertAlmostEqual(by_change["train.precision=bf16"]["delta"], 0.012, places=9)
        self.assertEqual(by_change["data.workers=2"]["delta"], 0)
        self.assertEqual(by_change["train.precision=bf16"]["seeds"], ["0"])
        self.assertTrue(all(e["variance_explained"] is None for e in doc["effects"]))
        self.assertNotIn("eta squared", html)
        self.assertIn("| train.precision = bf16 | 1 |", md)

    def test_grid60_small_multiples(self):
        d = os.path.join(self.tmp, "grid60")
        grid60(d)
        doc, layout, html, md = self.render("grid60", d)
        self.assertEqual(doc["summary"]["completed"], 60)
        self.assertEqual(len(doc["groups"]), 30)
        # 30 curves are split into panels of 10 by warmup; each legend names lr and clip
        # norm only (min_lr follows lr; warmup is the panel's).
        self.assertEqual(doc["facet_by"], "train.warmup")
        self.assertEqual([c["title"] for c in doc["charts"]],
                         ["train.warmup = 0", "train.warmup = 10", "train.warmup = 20"])
        self.assertEqual(doc["charts"][0]["labels"][0].split(", ")[0].split("=")[0], "clip_norm")
        for c in doc["charts"]:
            self.assertEqual(len(c["groups"]), 10)
            self.assertTrue(all("min_lr" not in l and "warmup" not in l for l in c["labels"]), c["labels"])
        self.assertIn("H3 train.warmup = 10", layout["headings"])
        # A plain hyperparameter sweep: no reproducibility classes, no throughput trade-off.
        self.assertFalse(doc["classes_matter"])
        self.assertEqual(doc["throughput_varies_with"], [])
        self.assertNotIn("reproducibility class", html)
        self.assertFalse(any("against tokens/s" in p for p in layout["plots"]), layout["plots"])
        self.assertIn("no trade-off", html)
        lr = next(e for e in doc["effects"] if e["key"] == "train.lr")
        self.assertEqual(lr["changes_together_with"], ["train.min_lr"])
        self.assertEqual(doc["importance_method"], "eta_squared")  # a crossed grid: no base point
        self.assertIsNone(doc["base_deltas"])
        self.assertGreater(lr["variance_explained"], 0.5)
        self.assertEqual(doc["effects"][0]["key"], "train.lr")  # the largest spread first

    def test_tpe40_slices_and_importance(self):
        d = os.path.join(self.tmp, "tpe40")
        tpe40(d)
        doc, layout, html, md = self.render("tpe40", d)
        self.assertEqual(doc["summary"]["completed"], 40)
        self.assertEqual(doc["search"]["kind"], "tpe")
        self.assertEqual(len(doc["search"]["trials"]), 40)
        # Every draw differs: binned, rank-based importance, the planted key first.
        self.assertEqual(doc["importance_method"], "rank_eta_squared")
        effects = {e["key"]: e for e in doc["effects"]}
        self.assertEqual(doc["effects"][0]["key"], "train.lr", [(e["key"], e["importance"]) for e in doc["effects"]])
        self.assertTrue(effects["train.lr"]["binned"] and effects["train.clip_norm"]["binned"])
        self.assertFalse(effects["train.warmup"]["binned"])  # five values: listed
        self.assertLessEqual(len(effects["train.lr"]["levels"]), 5)
        self.assertGreater(effects["train.lr"]["importance"], 0.5)
        self.assertLess(effects["train.clip_norm"]["importance"], 0.3)
        self.assertEqual(effects["train.lr"]["changes_together_with"], ["train.min_lr"])
        self.assertEqual(effects["train.clip_norm"]["changes_together_with"], [])
        self.assertNotIn("effects not separable)\n", md.split("train.clip_norm")[1][:200])
        # A slice per searched key.
        for key in ("train.lr", "train.warmup", "train.clip_norm"):
            self.assertIn("final train loss against " + key, layout["plots"])
        self.assertIn("Kruskal-Wallis", html)

    def test_halving_rungs(self):
        d = os.path.join(self.tmp, "halving")
        halving(d)
        doc, layout, html, md = self.render("halving", d)
        self.assertEqual(doc["summary"]["stopped"], 24)
        self.assertEqual(doc["summary"]["completed"], 3)
        s = doc["search"]
        self.assertEqual([(r["rung"], r["steps"], r["trials"], r["promoted"]) for r in s["rungs"]],
                         [(0, 16, 27, 9), (1, 50, 9, 3), (2, 150, 3, 0)])
        self.assertEqual([r["steps_spent"] for r in s["rungs"]], [27 * 16, 9 * 34, 3 * 100])
        self.assertEqual(len(s["paths"]), 27)
        self.assertEqual(sum(1 for p in s["paths"] if p["fate"] == "best of bracket"), 1)
        self.assertIn("train_loss_end against steps trained: each trial through its rungs", layout["plots"])
        self.assertIn("<h3>Trials by rung</h3>", html)
        self.assertIn("| 0 | 1 | 50 | 9 | 3 | 306 |", md)

    def test_pbt_schedules(self):
        # A real pbt search of the tiny model (24 steps, 6 members): each member's learning
        # rate over the steps, forks as jumps, and a table of every schedule.
        grid = os.path.join(self.tmp, "pbt.yaml")
        with open(os.path.join(ROOT, "tests", "data", "tiny_run.yaml"), encoding="utf-8") as f:
            model = yaml.safe_load(f)["model"]
        with open(grid, "w") as f:
            yaml.safe_dump({"name": "pbt", "base": {
                "model": model,
                "train": {"steps": 24, "micro_batch": 2, "schedule": "cosine", "warmup": 2, "eval_every": 6,
                          "eval_batches": 1, "threads": 1, "checkpoint_every": 6, "keep_checkpoints": 4},
                "data": {"eval_fraction": 0.1}},
                "search": {"kind": "pbt", "population": 6, "interval": 6, "seed": 5, "metric": "final_eval_loss",
                           "space": {"train.lr": {"loguniform": [1.0e-3, 3.0e-2]},
                                     "train.clip_norm": {"choice": [0.5, 1.0, 2.0]}}},
                "launch": {"parallel": 2, "slots": 2}}, f, sort_keys=False)
        d = os.path.join(self.tmp, "pbt")
        p = run([self.sweep, "run", grid, "--out", d, "--quiet"], timeout=600)
        self.assertEqual(p.returncode, 0, show(p))
        doc, layout, html, md = self.render("pbt", d)
        members = doc["search"]["members"]
        self.assertEqual(len(members), 6)
        self.assertEqual(sorted(m["rank"] for m in members), [1, 2, 3, 4, 5, 6])
        forks = [s for m in members for s in m["spans"] if s["from_member"] is not None]
        self.assertGreaterEqual(len(forks), 3)
        for m in members:  # the spans cover the steps, one after the other
            self.assertEqual(m["spans"][0]["from"], 1)
            self.assertEqual(m["spans"][-1]["to"], 24)
            for a, b in zip(m["spans"], m["spans"][1:]):
                self.assertEqual(b["from"], a["to"] + 1)
        self.assertIn("train.lr against step: train.lr each member trained with, by step", layout["plots"])
        self.assertIn('<table class="pbt-schedules">', html)
        self.assertIn(" (from member ", md)

    def test_program_sweep_metrics_have_curves(self):
        linreg = os.path.join(BIN_DIR, "linreg")
        self.assertTrue(os.access(linreg, os.X_OK), "linreg is not built in " + BIN_DIR)
        grid = os.path.join(self.tmp, "linreg.yaml")
        keys = {"features": {"type": "int", "default": 16, "min": 1, "max": 4096},
                "noise": {"type": "real", "default": 0.1, "min": 0, "max": 10},
                "flaw": {"type": "int", "default": 0, "min": 0, "max": 1000000}}
        with open(grid, "w") as f:
            yaml.safe_dump({"name": "linreg", "program": {"argv": [linreg], "kind": "linreg", "keys": keys},
                            "base": {"train": {"steps": 30, "micro_batch": 8, "accum": 2, "lr": 0.05,
                                               "checksum_every": 5}},
                            "grid": {"train.lr": [0.05, 0.1]}, "seeds": 2}, f, sort_keys=False)
        d = os.path.join(self.tmp, "program")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        env.pop("OPENBLAS_CORETYPE", None)
        p = run([self.sweep, "run", grid, "--out", d, "--quiet"], timeout=600, env=env)
        self.assertEqual(p.returncode, 0, show(p))
        doc, layout, html, md = self.render("program", d)
        self.assertEqual(doc["summary"]["completed"], 4)
        # Held-out loss and each metric of the program's own: a chart each, a curve per group.
        for name in ("eval_loss", "weight_error", "eval_within_0.1"):
            self.assertGreaterEqual(layout["curves"].get(name, 0), 2, "%s has no curves: %s" % (name, layout["curves"]))
            self.assertIn("### " + name.replace("_", "\\_"), md)
        self.assertFalse(doc["classes_matter"])


def main():
    global BIN_DIR
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BIN_DIR = os.path.abspath(sys.argv.pop(1))
    if not BROWSER:
        print("SKIP: chromium is not installed (containers/install-deps.sh installs Debian's chromium)")
        return 77
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
