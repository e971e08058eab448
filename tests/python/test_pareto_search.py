#!/usr/bin/python3
"""A search on several objectives, end to end (issue 58): tests/programs/zdt.py's ZDT1 run
by `sweep run` as a multi-objective TPE search with a constraint, and as a random search
with the same objectives.

- The search replays: the same grid file run with launch.parallel 1 and 2 writes the same
  search.log (every proposal, every run id, every metric to 17 digits).
- Its report lists the non-dominated trials: the front computed here from search.log's
  figures is the Markdown table's and the JSON's, and in headless Chromium the HTML's Pareto section
  rings exactly those trials in its scatter, joins them, and lists them in its table.
- A random search with a list of metrics names them in its log and its report draws the
  same front from the records.

Usage: test_pareto_search.py BIN_DIR [unittest options]. The Chromium part is skipped
without chromium (the rest runs).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_util  # noqa: E402
from cli_util import ROOT, run, show  # noqa: E402

cli_util.take_bin_dir()
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
N = 4  # variables of ZDT1: few, so that a dozen trials find a front of several


def grid(path, kind, launch_parallel, samples=12):
    keys = {"problem": {"type": "choice", "default": "zdt1", "choices": ["zdt1", "zdt2"]},
            "n": {"type": "int", "default": 30, "min": 2, "max": 30}}
    keys.update({"x%d" % i: {"type": "real", "default": 0.5, "min": 0, "max": 1} for i in range(30)})
    search = {"kind": kind, "samples": samples, "seed": 7,
              "metric": ["metrics.f1", "metrics.f2"], "mode": ["min", "min"],
              "constraints": ["metrics.f1 >= 0.05"],
              "space": {"model.x%d" % i: {"uniform": [0, 1]} for i in range(N)}}
    if kind == "tpe":
        search.update({"startup": 4, "parallel": 2})
    g = {"name": "zdt-" + kind,
         "program": {"argv": ["/usr/bin/python3", os.path.join(ROOT, "tests", "programs", "zdt.py")],
                     "pass_args": False, "kind": "zdt", "keys": keys, "honours": ["train.steps"]},
         "base": {"train": {"steps": 1}, "model": {"n": N}},
         "search": search, "launch": {"parallel": launch_parallel}}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(g, f, sort_keys=False)
    return path


def trials_of(log):
    """label -> (f1, f2, feasible) of every finished trial line of a tpe search.log."""
    out = {}
    for line in log.splitlines():
        m = re.match(r"(trial \d+) .* metrics\.f1=(\S+) metrics\.f2=(\S+) (feasible|infeasible)", line)
        if m:
            out[m.group(1)] = (float(m.group(2)), float(m.group(3)), m.group(4) == "feasible")
    return out


def front_of(trials):
    """The labels of the feasible trials no feasible trial dominates (both minimised)."""
    ok = {k: v for k, v in trials.items() if v[2]}
    return sorted(k for k, (a, b, _) in ok.items()
                  if not any(c <= a and d <= b and (c < a or d < b) for c, d, _ in ok.values()))


def md_front(md):
    """The trial labels of the Markdown report's Pareto table."""
    part = md[md.index("### Pareto front"):]
    part = part[:part.index("\n\n", part.index("| trial"))]
    rows = part[part.index("|---"):].splitlines()[1:]
    return sorted(row.split("|")[1].strip() for row in rows)


PROBE = r"""<script>
(function () {
  var s = document.querySelector("#pareto"), out = {};
  if (s) {
    var svg = s.querySelector("svg"), box = svg ? svg.getBoundingClientRect() : null;
    out.front = [].map.call(s.querySelectorAll("svg circle.front title"), function (t) {
      return t.textContent.split(" (")[0]; }).sort();
    out.others = s.querySelectorAll("svg circle.point").length;
    out.line = s.querySelectorAll("svg polyline.front").length;
    out.rows = [].map.call(s.querySelectorAll("table.pareto-front tbody tr"), function (tr) {
      return tr.cells[0].textContent; }).sort();
    out.outside = [].filter.call(s.querySelectorAll("svg circle"), function (c) {
      var r = c.getBoundingClientRect();
      return r.left < box.left || r.right > box.right || r.top < box.top || r.bottom > box.bottom; }).length;
  }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def probe(html_path, work):
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    page = os.path.join(work, "probe.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", PROBE + "</body>"))
    argv = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
            "--user-data-dir=" + tempfile.mkdtemp(dir=work), "--window-size=1400,1000",
            "--virtual-time-budget=5000", "--dump-dom", "file://" + page]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    return cli_util.probe_result(r)


class ParetoSearch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pareto_search.")
        cls.sweep = os.path.join(cli_util.BIN_DIR, "sweep")
        cls.logs = []
        for parallel in (1, 2):
            g = grid(os.path.join(cls.tmp, "tpe%d.yaml" % parallel), "tpe", parallel)
            out = os.path.join(cls.tmp, "tpe%d" % parallel)
            p = run([cls.sweep, "run", g, "--out", out])
            assert p.returncode == 0, show(p)
            with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
                cls.logs.append(f.read())
        cls.out = os.path.join(cls.tmp, "tpe2")

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("KEEP_TMP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_search_replays_at_any_parallel(self):
        self.assertEqual(self.logs[0], self.logs[1], "search.log differs between launch.parallel 1 and 2")
        log = self.logs[0]
        self.assertIn(" metric=metrics.f1,metrics.f2 mode=min,min constraints=metrics.f1>=0.05 keys=", log)
        self.assertIn("trial 4 batch 1 motpe (good 1 of 4): ", log)
        self.assertIn("trial 11 batch 4 motpe (good 1 of 10): ", log)
        self.assertEqual(len(trials_of(log)), 12, log)
        self.assertNotIn("(not finished)", log)

    def test_the_report_lists_and_draws_the_non_dominated_trials(self):
        front = front_of(trials_of(self.logs[1]))
        self.assertGreaterEqual(len(front), 2, "a front of one point draws no line")
        p = run([self.sweep, "report", self.out, "--format", "md", "-o", "-"])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertEqual(md_front(p.stdout), front, p.stdout)
        p = run([self.sweep, "report", self.out, "--format", "json", "-o", "-"])
        self.assertEqual(p.returncode, 0, show(p))
        search = json.loads(p.stdout)["search"]
        self.assertEqual(search["metrics"], ["metrics.f1", "metrics.f2"])
        self.assertEqual(search["constraints"], ["metrics.f1>=0.05"])
        self.assertEqual(sorted(t["trial"] for t in search["pareto"] if t["front"]), front)
        html = os.path.join(self.tmp, "report.html")
        p = run([self.sweep, "report", self.out, "-o", html])
        self.assertEqual(p.returncode, 0, show(p))
        if not BROWSER:
            self.skipTest("chromium not installed")
        dom = probe(html, self.tmp)
        self.assertEqual(dom.get("front"), front, dom)
        self.assertEqual(dom["rows"], front, dom)
        feasible = sum(1 for v in trials_of(self.logs[1]).values() if v[2])
        self.assertEqual(dom["others"], feasible - len(front), dom)
        self.assertEqual(dom["line"], 1, "the front is joined by one line")
        self.assertEqual(dom["outside"], 0, "points outside the plot")

    def test_a_random_search_names_its_objectives_and_its_report_draws_their_front(self):
        g = grid(os.path.join(self.tmp, "random.yaml"), "random", 2, samples=10)
        out = os.path.join(self.tmp, "random")
        p = run([self.sweep, "run", g, "--out", out])
        self.assertEqual(p.returncode, 0, show(p))
        with open(os.path.join(out, "search.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn("search random seed=7 samples=10 metric=metrics.f1,metrics.f2 mode=min,min "
                      "constraints=metrics.f1>=0.05 keys=", log)
        # The front from the records, judged here: each run's f1 and f2 from its report row.
        p = run([self.sweep, "report", out, "--format", "md", "-o", "-"])
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("### Pareto front", p.stdout)
        self.assertGreaterEqual(len(md_front(p.stdout)), 1, p.stdout)


if __name__ == "__main__":
    unittest.main()
