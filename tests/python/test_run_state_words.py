#!/usr/bin/python3
"""One run-state rule: no product source compares a run's status word as a string literal
(`status == "completed"`); every reader goes through results/record/run_status.h
(RunStatus, parse_status, status_is), so a misspelt state is a compile error and the
words are read and written in one place.

Usage: test_run_state_words.py [ROOT] [unittest options]
"""

import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE_DIRS = ("text", "config", "results", "trainer", "harness", "include")
WORDS = "pending|running|completed|diverged|stopped|failed|interrupted|damaged|stale"
COMPARED = re.compile(r'(==|!=)\s*"(%s)"|"(%s)"\s*(==|!=)' % (WORDS, WORDS))
HOME = os.path.join("results", "record", "run_status.cpp")


def comparisons(root):
    found = []
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".cpp", ".h", ".cu")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if rel == HOME:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("//", 1)[0]
                        if COMPARED.search(code):
                            found.append(f"{rel}:{n}: {line.strip()}")
    return found


class RunStateWords(unittest.TestCase):
    def test_no_state_is_compared_as_a_string(self):
        self.assertEqual(comparisons(ROOT), [], "compare RunStatus (run_status.h), not its words")

    def test_a_planted_comparison_is_found(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "harness", "x"))
            with open(os.path.join(tmp, "harness", "x", "a.cpp"), "w") as f:
                f.write('bool done(const R& r) { return r.status == "completed"; }\n'
                        '// a comment may say state == "failed"\n')
            self.assertEqual(len(comparisons(tmp)), 1)


if __name__ == "__main__":
    unittest.main()
