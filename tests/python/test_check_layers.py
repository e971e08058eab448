#!/usr/bin/python3
"""scripts/check-layers: the repository has no include loop and no include pointing up,
and the checker finds each kind of fault in a planted tree (so its silence means
something).

Usage: test_check_layers.py [unittest options]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check-layers")


def check(root=None):
    argv = [sys.executable, CHECK] + (["--root", root] if root else [])
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="check_layers_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def plant(self, files):
        for path, text in files.items():
            full = os.path.join(self.tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)

    def test_the_repository_is_clean(self):
        r = check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("no include loop, no include pointing up", r.stdout)

    def test_a_clean_planted_tree_passes(self):
        self.plant({"harness/os/process.h": "#pragma once\n",
                    "harness/grid/grid.h": '#include "process.h"\n',
                    "harness/grid/grid.cpp": '#include "grid.h"\n#include <vector>\n'})
        r = check(self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_an_include_pointing_up_is_named(self):
        # The review's finding: grid expansion included the halving executor (driver).
        self.plant({"harness/grid/grid_expand.cpp": '#include "halving_search.h"\n',
                    "harness/search/halving_search.h": '#include "sweep_run.h"\n',
                    "harness/driver/sweep_run.h": "#pragma once\n"})
        r = check(self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn('harness/grid/grid_expand.cpp: includes "halving_search.h" from harness/search/, '
                      "a layer above harness/grid/", r.stdout)

    def test_a_loop_through_header_and_source_is_named(self):
        # blas_kernel.cpp -> sweep_dir.h -> grid.h -> launch_config.h -> blas_kernel.h, all
        # in one folder so that no arrow points up: only the loop finds it.
        self.plant({"harness/driver/blas_kernel.h": "#pragma once\n",
                    "harness/driver/blas_kernel.cpp": '#include "blas_kernel.h"\n#include "sweep_dir.h"\n',
                    "harness/driver/sweep_dir.h": '#include "grid.h"\n',
                    "harness/driver/grid.h": '#include "launch_config.h"\n',
                    "harness/driver/launch_config.h": '#include "blas_kernel.h"\n'})
        r = check(self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("include loop: harness/driver/blas_kernel -> harness/driver/sweep_dir -> "
                      "harness/driver/grid -> harness/driver/launch_config -> harness/driver/blas_kernel", r.stdout)

    def test_a_source_at_the_top_of_harness_and_a_duplicate_header_are_named(self):
        self.plant({"harness/plan.cpp": "int x;\n",
                    "results/record/record.h": "#pragma once\n",
                    "results/report/record.h": "#pragma once\n"})
        r = check(self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("harness/plan.cpp: a source file at the top of harness/", r.stdout)
        self.assertIn("header name record.h also in", r.stdout)

    def test_the_design_table_must_match_the_tree(self):
        self.plant({"harness/os/process.h": "#pragma once\n",
                    "harness/grid/grid.h": '#include "process.h"\n',
                    "harness/extra/thing.h": "#pragma once\n",
                    "docs/design.md": "## Layout\n\n| folder | library |\n|---|---|\n"
                                      "| `harness/os/` | `sweep_os` |\n| `harness/gone/` | `sweep_gone` |\n"})
        r = check(self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("docs/design.md: the layout table has no row for harness/grid/", r.stdout)
        self.assertIn("docs/design.md: the layout table names harness/gone/, which is not in the tree", r.stdout)
        self.assertIn("harness/extra/: holds sources but is no layer of scripts/check-layers", r.stdout)


if __name__ == "__main__":
    unittest.main()
