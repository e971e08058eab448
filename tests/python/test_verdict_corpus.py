#!/usr/bin/python3
"""The verdict corpus (tests/verdict_corpus/README.md): each case's runs, made by real runs,
read back through every reader, which must all say what its expected.yaml says.

For each run the readers are `sweep status`, `sweep show`, `sweep report` as markdown, JSON,
CSV and HTML, and `sweep compare` of the sweep with itself. Each must give the run the
expected status word and exactly the expected health flags; each phrase of `says` must be
in every reader's sentences for those flags (status prints names only); `figures` in
`sweep show`'s figures line; and the run must be in the ranked results or listed apart as
`ranked` says (markdown, HTML and JSON).

Usage: test_verdict_corpus.py [BIN_DIR] [unittest options]
"""

import csv
import html as html_module
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

import cli_util
from cli_util import show, sweep

CORPUS = os.path.join(cli_util.ROOT, "tests", "verdict_corpus")
#: Flags that depend on the machine's load while the runs ran, not on the runs.
LOAD_FLAGS = {"throughput_outlier"}
STATUSES = ("completed", "diverged", "stopped", "failed", "interrupted", "damaged")


def config_value(cfg, dotted):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def same_value(a, b):
    if a is None or b is None:
        return a is b
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def md_text(cell):
    """A markdown cell's text: its emphasis and escapes undone."""
    return html_module.unescape(re.sub(r"\\(.)", r"\1", cell.replace("**", ""))).strip()


def md_table(md, heading):
    """The rows of the first table under `## heading`, as dicts by column."""
    at = md.find("\n## " + heading + "\n")
    if at < 0:
        return []
    lines = md[at:].split("\n")[2:]
    rows, head = [], None
    for line in lines:
        if not line.startswith("|"):
            if head is not None:
                break
            continue
        cells = [c for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if head is None:
            head = [md_text(c) for c in cells]
        elif not set(line) <= set("|- "):
            rows.append(dict(zip(head, [md_text(c) for c in cells])))
    return rows


def names(text):
    text = text.strip()
    return set() if text in ("", "ok") else set(text.split())


class Readers:
    """Every reader's words for every run of one sweep directory."""

    def __init__(self, test, out):
        self.test, self.out = test, out
        self.words = {}  # run id -> reader -> {"status", "flags", "text", "ranked"}

    def said(self, rid, reader, **kw):
        self.words.setdefault(rid, {}).setdefault(reader, {}).update(kw)

    def ok(self, *argv):
        p = sweep(*argv)
        self.test.assertEqual(p.returncode, 0, show(p))
        return p.stdout

    def read(self):
        t = self.test
        # sweep status: the state column and "health: ..." in its bracket.
        for line in self.ok("status", self.out).splitlines():
            m = re.match(r"  ([0-9a-f]{16})  (\S+) .*", line)
            if not m:
                continue
            h = re.search(r"health: ([^;\]]*)", line)
            detail = re.search(r"  \[(.*)\]$", line)
            self.said(m.group(1), "status", status=m.group(2), flags=names(h.group(1)) if h else set(),
                      cause=detail.group(1) if detail else "")
        # sweep show: its status and health lines and the flags' sentences below them.
        for rid in os.listdir(os.path.join(self.out, "runs")):
            text = self.ok("show", os.path.join(self.out, "runs", rid))
            status = re.search(r"^status: +(\w+)", text, re.M).group(1)
            health = re.search(r"^health: +(.*)$", text, re.M).group(1)
            figures = re.search(r"^figures: +(.*)$", text, re.M).group(1)
            flags = names(health)
            sentences = [ln for ln in text.splitlines() if any(ln.startswith("  %s: " % f) for f in flags)]
            driver = re.search(r"^driver: +(.*)$", text, re.M)
            self.said(rid, "show", status=status, flags=flags, text="\n".join(sentences), figures=figures,
                      cause=driver.group(1) if driver else "")
        # The markdown report: the runs table, the health table, and where the results table lists it.
        md = self.ok("report", self.out, "--format", "md", "-o", "-")
        for row in md_table(md, "Runs"):
            self.said(row["run"], "md", status=row["status"].split()[0], flags=names(row["health"]), text="",
                      shared_cores="(shared cores)" in row["tokens/s (median)"])
        for row in md_table(md, "Health"):
            self.words[row["run"]]["md"]["text"] += row["what"] + "\n"
        for m in re.finditer(r"\n### ([0-9a-f]{16}): (\w+)\n\n(.*)\n", md):  # a failed run, and its cause
            self.said(m.group(1), "md", status=m.group(2), cause=md_text(m.group(3)))
        # The JSON report: each run, its flags, and whether its group is ranked.
        rep = json.loads(self.ok("report", self.out, "--format", "json", "-o", "-"))
        ranked = {}
        for g in rep["groups"]:
            for rid in g["runs"]:
                ranked[rid] = g["ranked"]
        for r in rep["failed"]:
            self.said(r["run_id"], "json", status=r["status"], cause=r["cause"])
        for r in rep["runs"]:
            self.said(r["run_id"], "json", status=r["status"], objective_name=r["objective_name"],
                      shared_cores=r["shared_cores"],
                      flags={h["flag"] for h in r["health"]},
                      text="\n".join(h["detail"] for h in r["health"]), ranked=ranked[r["run_id"]])
        # The CSV report: a row per run.
        rows = list(csv.DictReader(io.StringIO(self.ok("report", self.out, "--format", "csv", "-o", "-"),
                                               newline="")))
        for r in rows:
            self.said(r["run_id"], "csv", status=r["status"], flags=names(r["health"]), text=r["health_detail"],
                      objective_name=r["objective_name"], cause=r["cause"])
        # The HTML report: the run's row of the runs table (its status cell, its flag spans).
        page = self.ok("report", self.out, "-o", "-")
        at = page.find("<h2>Results</h2>")
        results = page[at:page.index("<h2>", at + 10)] if at >= 0 else ""
        apart = results.find("<strong>Not ranked</strong>")
        for rid in self.words:
            m = next((m for m in re.finditer(r"<tr><td class=\"id\">%s</td><td>(%s)\b(.*?)</tr>"
                                             % (rid, "|".join(STATUSES)), page)
                      if not m.group(2).startswith("</td><td class=\"failure\">")), None)
            if m:  # the runs table: its status cell, its flags
                self.said(rid, "html", status=m.group(1),
                          flags=set(re.findall(r"<span class=\"flag\">(\w+)</span>", m.group(2))),
                          text=html_module.unescape(re.sub(r"<[^>]+>", " ", m.group(2))))
            failed = re.search(r"<tr><td class=\"id\">%s</td><td>(\w+)</td><td class=\"failure\">(.*?)</td>" % rid,
                               page)
            if failed:  # the failed runs' table (a diverged run is in both): its status and cause
                self.said(rid, "html", status=failed.group(1), cause=html_module.unescape(failed.group(2)))
            t.assertTrue(m or failed, "%s: no row in the HTML report" % rid)
        # Ranked or apart, in markdown and HTML: where the group's row is against "Not ranked".
        at = md.find("## Results")
        md_results = md[at:md.index("\n## ", at + 5)] if at >= 0 else ""
        md_apart = md_results.find("**Not ranked**")
        self.md_results, self.md_apart, self.html_results, self.html_apart = md_results, md_apart, results, apart
        # sweep compare of the sweep with itself: every readable record identical to itself.
        p = sweep("compare", self.out, self.out)
        for rid in self.words:
            self.said(rid, "compare", line=next((ln for ln in p.stdout.splitlines() if ln.startswith(rid)), ""))
        return self


class Corpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="verdict_corpus_test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def run_case(self, case):
        here = os.path.join(CORPUS, case)
        with open(os.path.join(here, "expected.yaml"), encoding="utf-8") as f:
            want = yaml.safe_load(f)
        out = os.path.join(self.tmp, case)
        with open(os.path.join(here, "grid.yaml"), encoding="utf-8") as f:
            ranks = config_value(yaml.safe_load(f), "base.dist.world_size") or 1
        if ranks > 1 and shutil.which("mpiexec") is None:
            self.skipTest("%s runs %d ranks and no mpiexec is installed" % (case, ranks))
        argv = [os.path.join(cli_util.BIN_DIR, "sweep"), "run", os.path.join(here, "grid.yaml"), "--out", out,
                "--parallel", "1"]
        if want.get("busy"):  # the runs share core 0 with a busy loop
            if not os.path.exists("/proc/thread-self/schedstat"):
                self.skipTest("this kernel keeps no schedstat")
            busy = subprocess.Popen(["taskset", "-c", "0", "/bin/sh", "-c", "while :; do :; done"])
            try:
                p = cli_util.run(["taskset", "-c", "0"] + argv)
            finally:
                busy.kill()
                busy.wait()
        else:
            p = cli_util.run(argv)
        self.assertEqual(p.returncode, want.get("exit", 0), show(p))
        configs = {}
        for rid in os.listdir(os.path.join(out, "runs")):
            with open(os.path.join(out, "runs", rid, "config.yaml"), encoding="utf-8") as f:
                configs[rid] = yaml.safe_load(f)

        def run_of(where):
            found = [rid for rid, cfg in configs.items()
                     if all(same_value(config_value(cfg, k), v) for k, v in where.items())]
            self.assertEqual(len(found), 1, "%s: %s matches %s" % (case, where, found))
            return found[0]

        for argv in want.get("then", []):
            args = []
            for a in argv:
                a = a.replace("{out}", out)
                m = re.fullmatch(r"\{run:([^=]+)=(.*)\}", a)
                args.append(os.path.join(out, "runs", run_of({m.group(1): m.group(2)})) if m else a)
            p = sweep(*args)
            self.assertEqual(p.returncode, 0, show(p))
            for rid in os.listdir(os.path.join(out, "runs")):
                with open(os.path.join(out, "runs", rid, "config.yaml"), encoding="utf-8") as f:
                    configs[rid] = yaml.safe_load(f)
        readers = Readers(self, out).read()
        self.assertEqual(len(readers.words), len(configs), sorted(readers.words))
        for expected in want["runs"]:
            rid = run_of(expected["where"])
            said = readers.words[rid]
            label = "%s, run %s (%s)" % (case, rid, expected["where"])
            for reader in ("status", "show", "md", "json", "csv", "html"):
                self.assertIn(reader, said, "%s: %s does not list it" % (label, reader))
                self.assertEqual(said[reader]["status"], expected["status"], "%s: %s's status" % (label, reader))
                for phrase in expected.get("cause", []):  # a run without a record: why, in every reader
                    self.assertIn(phrase, said[reader]["cause"], "%s: %s's cause" % (label, reader))
                if "flags" not in expected:
                    continue
                # A flag that depends on the machine's load while the runs ran (another test
                # beside this one) may be raised, but every reader must say it alike.
                self.assertEqual(said[reader]["flags"] - LOAD_FLAGS, set(expected["flags"]),
                                 "%s: %s's flags" % (label, reader))
                self.assertEqual(said[reader]["flags"] & LOAD_FLAGS, said["status"]["flags"] & LOAD_FLAGS,
                                 "%s: %s's load flags" % (label, reader))
                raised = said["status"]["flags"] >= set(expected.get("load_flags", [])) or not expected.get("load_flags")
                if reader != "status" and raised:  # status names the flags; the others say them
                    for phrase in expected.get("says", []):
                        self.assertIn(phrase, said[reader]["text"], "%s: %s's sentences" % (label, reader))
            # A load flag the case makes on purpose: raised when the run and at least two others
            # (all of a case's runs are peers) were measured on cores of their own; a run on shared
            # cores is neither judged nor a peer.
            own = [r for r, w in readers.words.items() if w.get("json", {}).get("shared_cores") is False]
            if "load_flags" in expected and rid in own and len(own) >= 3:
                self.assertLessEqual(set(expected["load_flags"]), said["status"]["flags"], label)
            for phrase in expected.get("figures", []):
                self.assertIn(phrase, said["show"]["figures"], label)
            for phrase in expected.get("not_figures", []):
                self.assertNotIn(phrase, said["show"]["figures"], label)
            if "shared_cores" in expected:  # marked beside its tokens/s, not a flag
                self.assertEqual(said["md"]["shared_cores"], expected["shared_cores"], label)
                self.assertEqual(said["json"]["shared_cores"], expected["shared_cores"], label)
            if "objective_name" in expected:
                self.assertEqual(said["json"]["objective_name"], expected["objective_name"], label)
                self.assertEqual(said["csv"]["objective_name"], expected["objective_name"], label)
            if "reproduce" in expected:
                p = sweep("reproduce", os.path.join(out, "runs", rid))
                self.assertEqual(p.returncode, 0, show(p))
                for phrase in expected["reproduce"]:
                    self.assertIn(phrase, p.stdout, label)
            if "ranked" in expected:
                self.assertEqual(said["json"]["ranked"], expected["ranked"], label)
            if expected.get("ranked") is False:  # the group rows carry no run id: that some are listed apart
                self.assertGreaterEqual(readers.md_apart, 0, label)
                self.assertGreaterEqual(readers.html_apart, 0, label)
            self.assertRegex(said["compare"]["line"], r"^%s  %s" % (rid, re.escape(expected.get(
                "compare", "identical bit-for-bit: "))), label)
        if all(r.get("ranked") for r in want["runs"]) and len(want["runs"]) == len(configs):
            self.assertEqual((readers.md_apart, readers.html_apart), (-1, -1), case)

    @classmethod
    def add_cases(cls):
        for case in sorted(os.listdir(CORPUS)):
            if os.path.isfile(os.path.join(CORPUS, case, "expected.yaml")):
                setattr(cls, "test_" + case, lambda self, c=case: self.run_case(c))


Corpus.add_cases()

if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main()
