#!/usr/bin/python3
"""The compiler cache never breaks a build: where ccache cannot write its cache (a
read-only home, a CCACHE_DIR it cannot create), configuring says so and the build compiles
without it; where it can, every compile goes through it.

Usage: test_build_cache.py [unittest options]
"""

import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def configure_and_build(build, env):
    # The smallest tree: no trainer, no tests; one library built.
    cfg = subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DSWEEP_BUILD_TRAINER=OFF",
                          "-DSWEEP_BUILD_TESTS=OFF"], capture_output=True, text=True, env=env, timeout=300)
    if cfg.returncode != 0:
        return cfg, None
    out = subprocess.run(["cmake", "--build", build, "--target", "sweep_text"], capture_output=True, text=True,
                         env=env, timeout=300)
    return cfg, out


@unittest.skipUnless(shutil.which("ccache"), "ccache is not installed")
class BuildCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="build_cache_test.")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_an_unwritable_cache_builds_without_it(self):
        env = dict(os.environ, CCACHE_DIR="/proc/sweep-no-cache-here")
        build = os.path.join(self.tmp, "b")
        cfg, out = configure_and_build(build, env)
        self.assertEqual(cfg.returncode, 0, cfg.stdout + cfg.stderr)
        self.assertIn("ccache cannot be used here", cfg.stderr)
        self.assertIn("compiling without it", cfg.stderr)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        with open(os.path.join(build, "CMakeFiles", "rules.ninja")) as f:
            self.assertNotIn("ccache", f.read(), "the launcher is still ccache")

    def test_a_usable_cache_is_the_launcher(self):
        env = dict(os.environ, CCACHE_DIR=os.path.join(self.tmp, "cache"))
        build = os.path.join(self.tmp, "b")
        cfg, out = configure_and_build(build, env)
        self.assertEqual(cfg.returncode, 0, cfg.stdout + cfg.stderr)
        self.assertNotIn("ccache cannot be used", cfg.stderr)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        with open(os.path.join(build, "CMakeFiles", "rules.ninja")) as f:
            self.assertTrue("ccache" in f.read(), "no compile goes through ccache")


if __name__ == "__main__":
    unittest.main()
