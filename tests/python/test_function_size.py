#!/usr/bin/python3
"""The function-size limit of .clang-tidy (readability-function-size, 120 lines), which
scripts/check-style applies to every product source: a function of 121 lines is a finding,
one of 120 is not, and every exemption in the tree (a NOLINTNEXTLINE naming the check)
says why on its own line.

Usage: test_function_size.py [unittest options]
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE_DIRS = ("text", "config", "results", "trainer", "harness")


def function_of(lines):
    """A function whose body (between its braces) is `lines` lines long."""
    body = "".join(f"  v += {i};\n" for i in range(lines - 2))
    return "int long_one(int v) {\n" + body + "  return v;\n}\n"


class FunctionSize(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="function_size_test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shutil.copy(os.path.join(ROOT, ".clang-tidy"), self.tmp)

    def tidy(self, text):
        src = os.path.join(self.tmp, "x.cpp")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run(["clang-tidy", "--quiet", src, "--", "-std=c++17"], capture_output=True, text=True,
                           cwd=self.tmp)
        # clang-tidy reads a .clang-tidy it cannot parse as no checks at all, and passes.
        self.assertNotIn("Error parsing", r.stderr, "the repository's .clang-tidy does not parse")
        return r

    def test_a_function_over_the_limit_is_a_finding(self):
        over = self.tidy(function_of(121))
        self.assertNotEqual(over.returncode, 0, over.stdout)
        self.assertIn("readability-function-size", over.stdout)
        at = self.tidy(function_of(120))
        self.assertEqual(at.returncode, 0, at.stdout + at.stderr)

    def test_an_exemption_needs_its_comment_to_silence_the_check(self):
        text = "// NOLINTNEXTLINE(readability-function-size): a table\n" + function_of(121)
        r = self.tidy(text)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_every_exemption_in_the_tree_says_why(self):
        found = []
        for top in SOURCE_DIRS:
            for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
                for name in names:
                    if not name.endswith((".cpp", ".h", ".cu")):
                        continue
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        for n, line in enumerate(f, 1):
                            if "readability-function-size" not in line:
                                continue
                            found.append(f"{os.path.relpath(path, ROOT)}:{n}")
                            self.assertRegex(line, r"NOLINTNEXTLINE\(readability-function-size\): \S.{8,}",
                                             f"{path}:{n}: an exemption without its reason")
        # Short: an exemption list that grows is a limit that is not kept.
        self.assertLessEqual(len(found), 3, found)


if __name__ == "__main__":
    unittest.main()
