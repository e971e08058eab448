#!/usr/bin/python3
"""The docs cannot go stale: README stays a front door (at most 200 lines, every doc it
names exists), and docs/commands.md's reference part is exactly what `sweep --help`,
each `sweep CMD --help` and `sweep-train --help` print, so every command and option is
documented. `test_docs.py BIN_DIR --write` regenerates that part.

Usage: test_docs.py [BIN_DIR] [--write | unittest options]
"""

import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import cli_util  # noqa: E402

COMMANDS = os.path.join(ROOT, "docs", "commands.md")
MARK = "<!-- generated from --help by tests/python/test_docs.py --write: do not edit below -->"


def helptext(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS="100"))
    # The usage line names the binary by the path it was run as.
    return re.sub(r"Usage: \S*/(sweep(-train)?)", r"Usage: \1", p.stdout).rstrip() + "\n"


def subcommands():
    text = helptext([os.path.join(cli_util.BIN_DIR, "sweep")])
    part = text.split("Subcommands:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^  (\w+) ", part, re.M)]


def reference():
    sweep = os.path.join(cli_util.BIN_DIR, "sweep")
    out = [MARK, "", "## sweep", "", "```", helptext([sweep]).rstrip(), "```"]
    for cmd in subcommands():
        out += ["", "## sweep " + cmd, "", "```", helptext([sweep, cmd]).rstrip(), "```"]
    out += ["", "## sweep-train", "", "```", helptext([os.path.join(cli_util.BIN_DIR, "sweep-train")]).rstrip(), "```"]
    return "\n".join(out) + "\n"


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Docs(unittest.TestCase):
    def test_readme_is_a_front_door(self):
        text = read(os.path.join(ROOT, "README.md"))
        self.assertLessEqual(len(text.splitlines()), 200, "README.md: keep it to what the tool is for; move the rest to docs/")
        for path in sorted(set(re.findall(r"\b((?:docs|python|results|tests/bench)/[\w./-]+\.md)\b", text))):
            self.assertTrue(os.path.exists(os.path.join(ROOT, path)), "README.md names %s, which is not there" % path)

    def test_every_command_and_option_is_in_commands_md(self):
        text = read(COMMANDS)
        self.assertIn(MARK, text, "docs/commands.md lost its generated part")
        self.assertEqual(text.split(MARK, 1)[1], reference()[len(MARK):],
                         "docs/commands.md is stale: run tests/python/test_docs.py build/bin --write")
        cmds = subcommands()
        self.assertGreaterEqual(len(cmds), 15)
        for cmd in cmds:  # the hand-written list at the top names each one too
            self.assertIn("sweep " + cmd, text.split(MARK, 1)[0], "docs/commands.md: no line for sweep " + cmd)


if __name__ == "__main__":
    cli_util.take_bin_dir()
    if "--write" in sys.argv:
        head = read(COMMANDS).split(MARK, 1)[0].rstrip("\n")
        with open(COMMANDS, "w", encoding="utf-8") as f:
            f.write(head + "\n\n" + reference())
        sys.exit(0)
    unittest.main(verbosity=2)
