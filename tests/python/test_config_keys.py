#!/usr/bin/python3
"""The run-config keys through the real `sweep`: `sweep keys` lists every key and its
Markdown is docs/config.md; `sweep plan` warns, at the grid's line, about a key that has
no effect with the options chosen, and plans the points that differ only there as one run;
train.min_lr_ratio gives the run of the equivalent train.min_lr.

Usage: test_config_keys.py [BIN_DIR] [unittest options]
"""

import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_util  # noqa: E402
from cli_util import show, sweep  # noqa: E402


def plan_ids(stdout):
    """The run ids of `sweep plan`'s table, in order."""
    return [m.group(1) for m in re.finditer(r"^([0-9a-f]{16})  ", stdout, re.M)]


class ConfigKeys(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="config_keys_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_keys_lists_every_key_and_its_markdown_is_the_checked_in_doc(self):
        p = sweep("keys")
        self.assertEqual(p.returncode, 0, show(p))
        rows = p.stdout.splitlines()
        self.assertTrue(rows[0].startswith("key "), rows[0])
        keys = [r.split()[0] for r in rows[1:]]
        for k in ("model.kind", "data.seed", "train.min_lr_ratio", "train.eval_batches", "fault.slow_rank"):
            self.assertIn(k, keys)
        self.assertEqual(len(keys), len(set(keys)))
        seed = next(r for r in rows if r.startswith("data.seed "))
        self.assertIn("data.kind synthetic", seed)
        md = sweep("keys", "--markdown")
        self.assertEqual(md.returncode, 0, show(md))
        with open(os.path.join(cli_util.ROOT, "docs", "config.md")) as f:
            self.assertEqual(md.stdout, f.read(),
                             "docs/config.md is stale: build/bin/sweep keys --markdown > docs/config.md")
        bad = sweep("keys", "--model-kind", "gpt")
        self.assertEqual(bad.returncode, 2, show(bad))
        self.assertIn("unknown model kind 'gpt'", bad.stderr)

    def test_plan_warns_at_the_line_and_plans_one_run_for_an_idle_key(self):
        corpus = self.write("corpus.txt", "the quick brown fox jumps over the lazy dog. " * 50)
        grid = self.write("grid.yaml",
                          "name: idle\n"
                          "base:\n"
                          "  data: {kind: text, path: %s}\n"
                          "grid:\n"
                          "  data.seed: [1, 2]\n" % corpus)
        p = sweep("plan", grid, "--out", os.path.join(self.tmp, "out"))
        self.assertEqual(p.returncode, 0, show(p))
        self.assertIn("sweep idle: 1 runs", p.stdout, show(p))
        self.assertEqual(len(plan_ids(p.stdout)), 1, show(p))
        self.assertIn("points dropped: 1 duplicates", p.stdout, show(p))
        warning = ("%s:5:15: warning: key 'data.seed' has no effect with data.kind text; "
                   "it is ignored and does not change run ids" % grid)
        self.assertIn(warning, p.stderr, show(p))
        self.assertEqual(p.stderr.count("warning: key 'data.seed'"), 1, show(p))
        # The same grid without the idle key plans the same run, and says nothing.
        plain = self.write("plain.yaml", "name: idle\nbase:\n  data: {kind: text, path: %s}\n" % corpus)
        q = sweep("plan", plain, "--out", os.path.join(self.tmp, "out"))
        self.assertEqual(q.returncode, 0, show(q))
        self.assertEqual(plan_ids(q.stdout), plan_ids(p.stdout))
        self.assertNotIn("warning", q.stderr)

    def test_a_min_lr_ratio_plans_the_runs_of_the_equivalent_min_lr(self):
        ratio = self.write("ratio.yaml", "name: r\nbase:\n  train: {min_lr_ratio: 0.1}\ngrid:\n"
                                         "  train.lr: [0.001, 0.01]\n")
        plain = self.write("plain.yaml", "name: r\nzip:\n  - {train.lr: [0.001, 0.01], "
                                         "train.min_lr: [0.0001, 0.001]}\n")
        out = os.path.join(self.tmp, "out")
        a, b = sweep("plan", ratio, "--out", out), sweep("plan", plain, "--out", out)
        self.assertEqual(a.returncode, 0, show(a))
        self.assertEqual(b.returncode, 0, show(b))
        self.assertEqual(len(plan_ids(a.stdout)), 2, show(a))
        self.assertEqual(plan_ids(a.stdout), plan_ids(b.stdout))
        both = self.write("both.yaml", "name: r\nbase:\n  train: {min_lr: 0.0001, min_lr_ratio: 0.1}\n")
        c = sweep("plan", both, "--out", out)
        self.assertEqual(c.returncode, 2, show(c))
        self.assertIn("%s:3:41: key 'train.min_lr_ratio': give either train.min_lr (at %s:3:19)" % (both, both),
                      c.stderr)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    unittest.main(verbosity=2)
