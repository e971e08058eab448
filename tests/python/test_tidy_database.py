#!/usr/bin/python3
"""scripts/tidy-database: clang-tidy sees every source of a unity batch (cmake/Unity.cmake)
as its own entry with the batch's command, and a source compiled by no entry is refused
by name rather than skipped.

Usage: test_tidy_database.py [unittest options]
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "scripts", "tidy-database")


class TidyDatabase(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tidy_database_test.")
        for path in ("trainer/a.cpp", "trainer/b.cpp", "trainer/cuda/c.cpp", "harness/d.cpp", "tests/t.cpp"):
            os.makedirs(os.path.join(self.root, os.path.dirname(path)), exist_ok=True)
            open(os.path.join(self.root, path), "w").close()
        subprocess.run(["git", "init", "-q", self.root], check=True)
        subprocess.run(["git", "-C", self.root, "add", "."], check=True)
        self.build = os.path.join(self.root, "build")
        os.makedirs(os.path.join(self.build, "trainer", "unity"))
        self.unity = os.path.join(self.build, "trainer", "unity", "lib_0.cpp")
        with open(self.unity, "w") as f:
            f.write('// generated\n#include "../../../trainer/a.cpp"\n#include "../../../trainer/b.cpp"\n')

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def entry(self, path):
        return {"directory": self.build, "file": path, "command": f"c++ -DX -o x.o -c {path}"}

    def run_tool(self, entries):
        with open(os.path.join(self.build, "compile_commands.json"), "w") as f:
            json.dump(entries, f)
        out = os.path.join(self.build, "tidy")
        r = subprocess.run([sys.executable, TOOL, self.build, out, "--root", self.root], capture_output=True,
                           text=True, timeout=60)
        return r, out

    def test_each_source_of_a_batch_gets_the_batch_command(self):
        d = os.path.join(self.root, "harness", "d.cpp")
        r, out = self.run_tool([self.entry(self.unity), self.entry(d)])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "compile_commands.json")) as f:
            entries = json.load(f)
        by_file = {e["file"]: e["command"] for e in entries}
        a = os.path.join(self.root, "trainer", "a.cpp")
        b = os.path.join(self.root, "trainer", "b.cpp")
        self.assertEqual(sorted(by_file), sorted([a, b, d]))
        self.assertEqual(by_file[a], f"c++ -DX -o x.o -c {a}")
        self.assertEqual(by_file[b], f"c++ -DX -o x.o -c {b}")

    def test_a_source_no_entry_compiles_is_refused_by_name(self):
        r, out = self.run_tool([self.entry(self.unity)])
        self.assertEqual(r.returncode, 1)
        self.assertIn("harness/d.cpp", r.stderr)
        self.assertNotIn("cuda/c.cpp", r.stderr)  # CUDA-only sources are not expected here
        self.assertNotIn("tests/t.cpp", r.stderr)  # nor tests
        self.assertFalse(os.path.exists(os.path.join(out, "compile_commands.json")))


if __name__ == "__main__":
    unittest.main()
