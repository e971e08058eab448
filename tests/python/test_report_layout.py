#!/usr/bin/python3
"""The report of a real seven-tricks sweep in a 1400 px window (issue 55): every column of
the results table readable, every curve inside its plot, runs tables one line a run.

sweeps/seven-tricks.yaml is run by `sweep run` with 24 steps instead of 60 (every include
entry kept: fp32, bf16 and fp16 runs, so the fp16 loss-scale chart has real curves; the
ZeRO entries only where mpiexec is installed), into a directory not named after the
sweep. `sweep report DIR`, run by hand, writes the page, which headless Chromium lays out
at 1400 px while a probe script measures, through the DOM:

- the results table: each column's heading inside the window and inside the visible part
  of its scroll box (the box itself inside the window), so no column waits off-screen;
- each line chart: the plot area (its two axis lines) and every point of every curve, none
  outside it; the loss-scale chart on a log axis with every run's curve strictly inside
  (none drawn on an edge, none marked clipped);
- each table of runs: its rows all one height.

It also checks the page's title: the sweep's own name (the grid's `name`), not the
directory's.

Usage: test_report_layout.py [BIN_DIR] [unittest options]   (BIN_DIR holds sweep and
sweep-train). Exit 77 (skipped) without chromium. KEEP_TMP=1 keeps the sweep and the page.
"""

import os
import shutil
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402
from cli_util import ROOT, run, show  # noqa: E402
import test_report_views as views  # noqa: E402  (chromium, probe, WIDTH)

STEPS = 24  # seven-tricks trains 60; the linear schedule's warmup of 20 still fits

# Leaves its measurements (JSON) in <pre id="probe">; see the module's docstring.
PROBE = r"""<script>
(function () {
  var W = window.innerWidth;
  var out = {window_width: W, page_width: document.documentElement.scrollWidth, results: null, charts: [],
             runs_tables: []};
  var t = document.querySelector("table.results");
  if (t) {
    var box = t.closest(".wide") || t.parentElement, b = box.getBoundingClientRect();
    var seen = {left: Math.max(0, b.left + box.clientLeft), right: Math.min(W, b.left + box.clientLeft + box.clientWidth)};
    var outside = [];
    t.querySelectorAll("thead th").forEach(function (th) {
      var r = th.getBoundingClientRect();
      if (r.left < seen.left - 1 || r.right > seen.right + 1)
        outside.push(th.textContent + " (" + Math.round(r.left) + ".." + Math.round(r.right) + " px)");
    });
    out.results = {columns: t.querySelectorAll("thead th").length, outside: outside,
                   box: [Math.round(b.left), Math.round(b.right)], seen: [Math.round(seen.left), Math.round(seen.right)],
                   table_width: Math.round(t.getBoundingClientRect().width)};
  }
  document.querySelectorAll("svg.lines").forEach(function (svg) {
    var name = svg.getAttribute("aria-label"), v = null, h = null;
    svg.querySelectorAll("line.axis").forEach(function (l) {
      var x1 = +l.getAttribute("x1"), x2 = +l.getAttribute("x2"), y1 = +l.getAttribute("y1"), y2 = +l.getAttribute("y2");
      if (x1 === x2 && (!v || Math.abs(y2 - y1) > v.bottom - v.top))
        v = {x: x1, top: Math.min(y1, y2), bottom: Math.max(y1, y2)};
      if (y1 === y2 && (!h || Math.abs(x2 - x1) > h.right - h.left))
        h = {y: y1, left: Math.min(x1, x2), right: Math.max(x1, x2)};
    });
    var chart = {name: name, log_y: false, curves: 0, points: 0, outside: [], on_edge: 0,
                 clipped: svg.querySelectorAll("path.clipped").length};
    svg.querySelectorAll("text").forEach(function (x) {
      if (/\(log scale\)$/.test(x.textContent) && x.getAttribute("transform")) chart.log_y = true;
    });
    if (!v || !h) { chart.outside.push("no axes"); out.charts.push(chart); return; }
    var a = {left: v.x, right: h.right, top: v.top, bottom: h.y}, e = 0.06;  // coordinates have one decimal
    chart.area = a;
    function point(x, y) {
      chart.points++;
      if (x < a.left - e || x > a.right + e || y < a.top - e || y > a.bottom + e)
        chart.outside.push(x + "," + y);
      else if (y < a.top + e || y > a.bottom - e)
        chart.on_edge++;
    }
    svg.querySelectorAll(".curves polyline:not(.leader)").forEach(function (p) {
      chart.curves++;
      p.getAttribute("points").trim().split(/\s+/).forEach(function (xy) {
        var c = xy.split(",");
        point(+c[0], +c[1]);
      });
    });
    svg.querySelectorAll(".curves circle").forEach(function (c) {
      chart.curves++;
      point(+c.getAttribute("cx"), +c.getAttribute("cy"));
    });
    out.charts.push(chart);
  });
  document.querySelectorAll("table.runs").forEach(function (t) {
    var heights = [];
    t.querySelectorAll("tbody tr").forEach(function (tr) { heights.push(tr.getBoundingClientRect().height); });
    out.runs_tables.push({heading: t.querySelector("thead th:nth-child(2)").textContent, heights: heights});
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


class SevenTricksAt1400(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="report_layout.")
        with open(os.path.join(ROOT, "sweeps", "seven-tricks.yaml")) as f:
            grid = yaml.safe_load(f)
        grid["base"]["train"]["steps"] = STEPS
        cls.mpi = shutil.which("mpiexec") is not None
        if not cls.mpi:  # the ZeRO entries run on 2 ranks under mpiexec
            grid["include"] = [e for e in grid["include"] if "dist.world_size" not in e]
        cls.runs = 1 + len(grid["include"])
        path = os.path.join(cls.tmp, "seven-tricks-cut.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(grid, f, sort_keys=False)
        cls.dir = os.path.join(cls.tmp, "cut")  # not the sweep's name
        cls.ran = run([os.path.join(cli_util.BIN_DIR, "sweep"), "run", path, "--out", cls.dir, "--quiet"])
        cls.work = os.path.join(cls.tmp, "work")
        os.makedirs(cls.work)
        cls.html_path = os.path.join(cls.work, "report.html")
        # By hand, as a user would: no --title.
        cls.reported = run([os.path.join(cli_util.BIN_DIR, "sweep"), "report", cls.dir, "-o", cls.html_path])
        cls.layout = None
        if cls.ran.returncode == 0 and cls.reported.returncode == 0:
            with open(cls.html_path, encoding="utf-8") as f:
                cls.html = f.read()
            cls.layout = views.probe(cls.html_path, cls.work, PROBE)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("KEEP_TMP"):
            print("kept " + cls.tmp)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.ran.returncode, 0, show(self.ran))
        self.assertEqual(self.reported.returncode, 0, show(self.reported))
        self.assertIsNotNone(self.layout)

    def test_the_sweep_ran_every_precision(self):
        self.assertIn("%d completed, 0 already done, 0 failed" % self.runs, self.ran.stdout, show(self.ran))
        for precision in ("fp16", "bf16"):
            self.assertIn("precision=" + precision, self.html)

    def test_the_report_is_titled_with_the_sweeps_own_name_not_its_directorys(self):
        title = self.html[self.html.find("<title>"):self.html.find("</title>") + 8]
        self.assertEqual(title, "<title>seven-tricks</title>")
        self.assertIn("<h1>seven-tricks</h1>", self.html, title)

    def test_every_column_of_the_results_table_is_in_view(self):
        L = self.layout
        self.assertEqual(L["window_width"], views.WIDTH)
        self.assertLessEqual(L["page_width"], views.WIDTH, "something widens the page")
        r = L["results"]
        self.assertIsNotNone(r, "no results table")
        self.assertGreaterEqual(r["columns"], 14 if self.mpi else 12)
        self.assertTrue(0 <= r["box"][0] and r["box"][1] <= views.WIDTH, "the table's box leaves the window: %s" % r)
        self.assertEqual(r["outside"], [], "columns of the results table out of view at %d px: %s" % (views.WIDTH, r))

    def test_every_curve_point_lies_inside_its_plot_area(self):
        charts = self.layout["charts"]
        self.assertGreaterEqual(len(charts), 5)
        for c in charts:
            self.assertGreater(c["points"], 0, c["name"])
            self.assertEqual(c["outside"][:5], [], "%s: points outside the plot area %s" % (c["name"], c.get("area")))

    def test_the_loss_scale_chart_holds_every_run_on_a_log_axis(self):
        scale = [c for c in self.layout["charts"] if c["name"].startswith("loss scale against step")]
        self.assertEqual(len(scale), 1, [c["name"] for c in self.layout["charts"]])
        c = scale[0]
        self.assertTrue(c["log_y"], c)
        groups = self.runs - 2  # the base's seeds 1 and 2 are its group's runs
        self.assertEqual(c["curves"], groups, c)
        self.assertEqual(c["clipped"], 0, "curves drawn clipped: %s" % c)
        self.assertEqual(c["on_edge"], 0, "points on the plot's edge (clamped there): %s" % c)

    def test_tables_of_runs_have_rows_of_one_height(self):
        tables = self.layout["runs_tables"]
        self.assertEqual(len(tables), 2, tables)  # the diagnostics' and the runs'
        for t in tables:
            h = t["heights"]
            self.assertEqual(len(h), self.runs)
            self.assertLessEqual(max(h) - min(h), 1, "rows of uneven height in the table of %s: %s" % (t["heading"], h))


def main():
    cli_util.take_bin_dir()
    if not views.BROWSER:
        print("SKIP: chromium is not installed (containers/install-deps.sh installs Debian's chromium)")
        return 77
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
