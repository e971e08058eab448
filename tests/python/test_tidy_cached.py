#!/usr/bin/python3
"""scripts/tidy-cached: a source found clean is not run through clang-tidy again while its
preprocessed text, command and the checks are the same, in this clone or another clone of
the same files (CI's fresh clone); a change anywhere in what it includes, a planted finding
or a NOLINT comment, runs it again, and a finding is never hidden by the cache.

Usage: test_tidy_cached.py [unittest options]
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLEAN = '#include "x.h"\nint twice(int v) { return 2 * v; }\n'
FINDING = ('#include <vector>\n#include "x.h"\nstd::vector<int> upto(int n) {\n  std::vector<int> v;\n'
           '  for (int i = 0; i < n; ++i) v.push_back(i);%s\n  return v;\n}\n')


class TidyCached(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tidy_cached_test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.cache = os.path.join(self.tmp, "cache")

    def clone(self, name, source=CLEAN, header="int twice(int v);\n"):
        """A repository of one source (harness/x.cpp) with its own copy of the script and
        .clang-tidy, and a compilation database with absolute paths into it."""
        root = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(root, "scripts"))
        os.makedirs(os.path.join(root, "harness"))
        os.makedirs(os.path.join(root, "build"))
        shutil.copy(os.path.join(ROOT, "scripts", "tidy-cached"), os.path.join(root, "scripts"))
        shutil.copy(os.path.join(ROOT, ".clang-tidy"), root)
        self.write(root, source, header)
        src = os.path.join(root, "harness", "x.cpp")
        with open(os.path.join(root, "build", "compile_commands.json"), "w") as f:
            json.dump([{"directory": os.path.join(root, "build"), "file": src,
                        "command": "c++ -I%s/harness -std=c++17 -o x.o -c %s" % (root, src)}], f)
        return root

    def write(self, root, source, header):
        with open(os.path.join(root, "harness", "x.cpp"), "w") as f:
            f.write(source)
        with open(os.path.join(root, "harness", "x.h"), "w") as f:
            f.write(header)

    def tidy(self, root):
        env = dict(os.environ, SWEEP_TIDY_CACHE=self.cache)
        return subprocess.run([os.path.join(root, "scripts", "tidy-cached"), os.path.join(root, "build"),
                               "harness/.*\\.cpp$"], capture_output=True, text=True, env=env, timeout=300)

    def expect(self, root, code, summary):
        p = self.tidy(root)
        self.assertEqual(p.returncode, code, p.stdout + p.stderr)
        self.assertIn(summary, p.stdout, p.stdout + p.stderr)
        return p

    def test_a_clean_source_is_not_run_again_in_this_clone_or_another(self):
        a = self.clone("a")
        self.expect(a, 0, "1 sources, 0 clean from the cache, 1 run, 0 with findings")
        self.expect(a, 0, "1 sources, 1 clean from the cache, 0 run")
        b = self.clone("b")  # the same files at another path
        self.expect(b, 0, "1 sources, 1 clean from the cache, 0 run")
        # A header it includes changed: run again.
        self.write(b, CLEAN, "int twice(int v);\nint thrice(int v);\n")
        self.expect(b, 0, "1 sources, 0 clean from the cache, 1 run")

    def test_a_finding_is_never_hidden_and_nolint_counts(self):
        a = self.clone("a", FINDING % "")
        self.expect(a, 1, "1 run, 1 with findings")
        self.assertIn("performance-inefficient-vector-operation", self.log_of(a))
        self.expect(a, 1, "0 clean from the cache, 1 run, 1 with findings")  # never cached
        # A comment that silences it is part of the key: run, then clean and cached.
        self.write(a, FINDING % "  // NOLINT(performance-inefficient-vector-operation)", "int twice(int v);\n")
        self.expect(a, 0, "0 clean from the cache, 1 run, 0 with findings")
        self.expect(a, 0, "1 clean from the cache, 0 run")
        # The finding back: the cache of the silenced text does not hide it.
        self.write(a, FINDING % "", "int twice(int v);\n")
        self.expect(a, 1, "1 with findings")

    def log_of(self, root):
        log = os.path.join(self.tmp, "tidy.log")
        env = dict(os.environ, SWEEP_TIDY_CACHE=self.cache)
        subprocess.run([os.path.join(root, "scripts", "tidy-cached"), os.path.join(root, "build"),
                        "harness/.*\\.cpp$", "--log", log], capture_output=True, env=env, timeout=300)
        with open(log) as f:
            return f.read()


if __name__ == "__main__":
    unittest.main(verbosity=2)
